#include "tessera/graph/compile.h"

#include <algorithm>
#include <cstdlib>
#include <iostream>
#include <string_view>

#include "tessera/graph/passes/passes.h"

namespace tessera::graph {

namespace {

bool same_signature(const TensorMeta& a, const TensorMeta& b) {
  return a.shape == b.shape && a.dtype == b.dtype && a.device == b.device;
}

// What differs between the closest cached signature and the new one, in
// words: "input 0 shape [4, 6] -> [8, 6]".
std::string what_changed(const MetaVector& before, const MetaVector& now) {
  if (before.size() != now.size()) {
    return "the number of inputs " + std::to_string(before.size()) + " -> " +
           std::to_string(now.size());
  }
  std::string text;
  auto add = [&](size_t i, const char* field, const std::string& from, const std::string& to) {
    text += (text.empty() ? "" : ", ") + std::string("input ") + std::to_string(i) + " " + field +
            " " + from + " -> " + to;
  };
  for (size_t i = 0; i < now.size(); ++i) {
    if (before[i].shape != now[i].shape) {
      add(i, "shape", shape_str(before[i].shape), shape_str(now[i].shape));
    }
    if (before[i].dtype != now[i].dtype) {
      add(i, "dtype", dtype_name(before[i].dtype), dtype_name(now[i].dtype));
    }
    if (before[i].device != now[i].device) {
      add(i, "device", device_str(before[i].device), device_str(now[i].device));
    }
  }
  return text;
}

bool explain() {
  const char* value = std::getenv("TESSERA_GRAPH_EXPLAIN");
  return value != nullptr && std::string_view(value) != "0" && std::string_view(value) != "";
}

}  // namespace

const std::vector<std::string>& pass_names() {
  static const std::vector<std::string> names = {"simplify_algebra", "common_subexpressions",
                                                 "dead_code"};
  return names;
}

Graph run_passes(const Graph& graph, const std::vector<std::string>& disabled) {
  for (const std::string& name : disabled) {
    if (std::find(pass_names().begin(), pass_names().end(), name) != pass_names().end()) continue;
    std::string valid;
    for (const std::string& pass : pass_names()) valid += (valid.empty() ? "" : ", ") + pass;
    TESSERA_FAIL("[graph::compile] unknown pass '", name, "'; valid: ", valid);
  }
  auto on = [&](const std::string& name) {
    return std::find(disabled.begin(), disabled.end(), name) == disabled.end();
  };
  Graph out = graph;
  if (on("simplify_algebra")) out = simplify_algebra(out);
  if (on("common_subexpressions")) out = eliminate_common_subexpressions(out);
  if (on("dead_code")) out = eliminate_dead_code(out);
  return out;
}

CompiledFunction::CompiledFunction(TracedFn fn, CompileOptions options)
    : fn_(std::move(fn)), options_(std::move(options)) {
  TESSERA_CHECK(fn_ != nullptr, "[graph::compile] needs a function");
  (void)run_passes(Graph(), options_.disabled_passes);  // checks the pass names now
}

const CompiledFunction::Plan& CompiledFunction::plan_for(const TensorVector& inputs) {
  MetaVector signature;
  for (const Tensor& input : inputs) {
    TESSERA_CHECK(input.defined(), "[graph::compile] an input is undefined");
    signature.push_back(input.meta());
  }
  for (size_t p = 0; p < plans_.size(); ++p) {
    const MetaVector& cached = plans_[p].signature;
    if (cached.size() == signature.size() &&
        std::equal(cached.begin(), cached.end(), signature.begin(), same_signature)) {
      last_ = static_cast<int>(p);
      return plans_[p];
    }
  }
  if (explain() && !plans_.empty()) {
    std::cerr << "[graph::compile] compiling again (compile " << compiles_ + 1
              << "): " << what_changed(plans_.back().signature, signature) << "\n";
  }
  plans_.push_back({signature, run_passes(trace(fn_, inputs), options_.disabled_passes)});
  ++compiles_;
  last_ = static_cast<int>(plans_.size()) - 1;
  return plans_.back();
}

TensorVector CompiledFunction::operator()(const TensorVector& inputs) {
  return run(plan_for(inputs).graph, inputs);
}

const Graph& CompiledFunction::last_graph() const {
  TESSERA_CHECK(last_ >= 0, "[graph::compile] the function has not been called yet");
  return plans_[static_cast<size_t>(last_)].graph;
}

CompiledFunction compile(TracedFn fn, CompileOptions options) {
  return CompiledFunction(std::move(fn), std::move(options));
}

}  // namespace tessera::graph
