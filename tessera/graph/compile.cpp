#include "tessera/graph/compile.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <optional>
#include <string_view>

#include "tessera/distributed/group.h"
#include "tessera/graph/passes/passes.h"

namespace tessera::graph {

namespace {

bool same_signature(const TensorMeta& a, const TensorMeta& b) {
  return a.shape == b.shape && a.dtype == b.dtype && a.device == b.device &&
         a.placement == b.placement && a.sbp == b.sbp;
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
    auto placement = [](const TensorMeta& m) {
      return m.is_global() ? placement_str(m.placement) : std::string("local");
    };
    auto sbp = [](const TensorMeta& m) {
      return m.is_global() ? nd_sbp_str(m.sbp) : std::string("local");
    };
    if (placement(before[i]) != placement(now[i])) {
      add(i, "placement", placement(before[i]), placement(now[i]));
    } else if (sbp(before[i]) != sbp(now[i])) {
      add(i, "sbp", sbp(before[i]), sbp(now[i]));
    }
  }
  return text;
}

AutoParallelizer& auto_parallelizer() {
  static AutoParallelizer parallelizer;
  return parallelizer;
}

bool explain() {
  const char* value = std::getenv("TESSERA_GRAPH_EXPLAIN");
  return value != nullptr && std::string_view(value) != "0" && std::string_view(value) != "";
}

}  // namespace

namespace {

using Pass = Graph (*)(const Graph&);
// compile's passes, in the order they run.
constexpr std::pair<const char*, Pass> kPasses[] = {
    {"simplify_algebra", simplify_algebra},
    {"common_subexpressions", eliminate_common_subexpressions},
    {"constant_folding", fold_constants},  // after CSE: equal numbers are merged first
    {"dead_code", eliminate_dead_code},
    {"rematerialization", rematerialize},      // on the nodes that remain
    {"elementwise_fusion", fuse_elementwise},  // last: it sees the final nodes
};

}  // namespace

const std::vector<std::string>& pass_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> out;
    for (const auto& pass : kPasses) out.emplace_back(pass.first);
    return out;
  }();
  return names;
}

GraphDump::GraphDump() {
  const char* dir = std::getenv("TESSERA_GRAPH_DUMP");
  if (dir == nullptr || *dir == '\0') return;
  static std::atomic<int> compiles{0};
  folder_ = dir;
  compile_ = ++compiles;
  std::error_code error;
  std::filesystem::create_directories(folder_, error);
  TESSERA_CHECK(!error, "[graph::compile] TESSERA_GRAPH_DUMP: cannot create ", folder_, ": ",
                error.message());
}

void GraphDump::write(const std::string& stage, const Graph& graph) {
  if (folder_.empty()) return;
  char prefix[48];
  // The ranks of a job write side by side: each names its files.
  const auto world = distributed::default_group();
  if (world->size() > 1) {
    std::snprintf(prefix, sizeof prefix, "rank%d_compile%d_%02d_", world->rank(), compile_,
                  step_++);
  } else {
    std::snprintf(prefix, sizeof prefix, "compile%d_%02d_", compile_, step_++);
  }
  const std::string base = folder_ + "/" + prefix + stage;
  for (const auto& [path, text] :
       {std::pair{base + ".txt", graph.str()}, std::pair{base + ".dot", graph.dot()}}) {
    std::ofstream file(path);
    file << text;
    TESSERA_CHECK(file.good(), "[graph::compile] TESSERA_GRAPH_DUMP: cannot write ", path);
  }
}

void check_pass_names(const std::vector<std::string>& names) {
  for (const std::string& name : names) {
    if (std::find(pass_names().begin(), pass_names().end(), name) != pass_names().end()) continue;
    std::string valid;
    for (const std::string& pass : pass_names()) valid += (valid.empty() ? "" : ", ") + pass;
    TESSERA_FAIL("[graph::compile] unknown pass '", name, "'; valid: ", valid);
  }
}

Graph run_passes(const Graph& graph, const std::vector<std::string>& disabled, bool dump) {
  check_pass_names(disabled);
  std::optional<GraphDump> dumps;
  if (dump) dumps.emplace();
  if (dumps) dumps->write("traced", graph);
  Graph out = graph;
  for (const auto& [name, pass] : kPasses) {
    if (std::find(disabled.begin(), disabled.end(), name) != disabled.end()) continue;
    out = pass(out);
    if (dumps) dumps->write(name, out);
  }
  return out;
}

CompiledFunction::CompiledFunction(TracedFn fn, CompileOptions options)
    : fn_(std::move(fn)), options_(std::move(options)) {
  TESSERA_CHECK(fn_ != nullptr, "[graph::compile] needs a function");
  // TESSERA_GRAPH_DISABLE=pass,pass switches passes off for every compile
  // of the process, as disabled_passes does for one (to compare without
  // changing code).
  if (const char* names = std::getenv("TESSERA_GRAPH_DISABLE")) {
    std::string_view rest(names);
    while (!rest.empty()) {
      const size_t comma = rest.find(',');
      const std::string_view name = rest.substr(0, comma);
      if (!name.empty()) options_.disabled_passes.emplace_back(name);
      rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
    }
  }
  check_pass_names(options_.disabled_passes);
  if (!options_.auto_parallel) {
    TESSERA_CHECK(!options_.mesh.defined() && options_.memory_budget == 0,
                  "[graph::compile] a mesh and a memory budget are options of auto_parallel; "
                  "set .auto_parallel = true to plan the step for them");
    return;
  }
  TESSERA_CHECK(
      options_.mesh.defined() && (options_.mesh.ndim() == 1 || options_.mesh.ndim() == 2),
      "[graph::compile] auto_parallel needs a mesh of 1 or 2 axes to plan for (.mesh), got ",
      options_.mesh.defined() ? placement_str(options_.mesh) : std::string("none"));
  TESSERA_CHECK(options_.memory_budget >= 0,
                "[graph::compile] memory_budget is bytes per rank, or 0 for no limit; got ",
                options_.memory_budget);
  TESSERA_CHECK(auto_parallelizer() != nullptr,
                "[graph::compile] auto_parallel needs the planner: link Tessera::planner "
                "(Tessera::tessera includes it)");
}

void set_auto_parallelizer(AutoParallelizer parallelizer) {
  auto_parallelizer() = std::move(parallelizer);
}

void CompiledFunction::note_marks(const TensorVector& inputs) {
  if (marks_.size() < inputs.size()) marks_.resize(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    for (int64_t dim : dynamic_dims(inputs[i])) {
      std::vector<int64_t>& dims = marks_[i];
      if (std::find(dims.begin(), dims.end(), dim) != dims.end()) continue;
      dims.push_back(dim);
      std::sort(dims.begin(), dims.end());
      templates_.clear();  // made for other marks
      dynamic_refused_ = false;  // and so was a refusal
    }
  }
}

bool CompiledFunction::has_marks() const {
  return std::any_of(marks_.begin(), marks_.end(), [](const auto& dims) { return !dims.empty(); });
}

std::optional<CompiledFunction::Plan> CompiledFunction::replan(const MetaVector& signature) {
  for (size_t t = 0; t < templates_.size(); ++t) {
    const ShapeTemplate& shape_template = *templates_[t].shapes;
    const std::optional<std::vector<int64_t>> sizes = shape_template.sizes_of(signature);
    if (!sizes) continue;
    std::string changed;
    for (const auto& guard : shape_template.traced().host().guards) {
      changed = guard();
      if (!changed.empty()) break;
    }
    if (!changed.empty()) {  // the template baked in what the host changed
      templates_.erase(templates_.begin() + static_cast<std::ptrdiff_t>(t));
      return std::nullopt;
    }
    const auto start = std::chrono::steady_clock::now();
    try {
      Graph graph = shape_template.instantiate(*sizes);
      if (!templates_[t].optimised) graph = run_passes(graph, options_.disabled_passes);
      Plan plan{signature,
                std::make_shared<Executor>(std::move(graph), templates_[t].memory_variant)};
      ++replans_;
      const double ms =
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
              .count();
      replan_seconds_ += ms / 1e3;
      if (explain()) {
        std::cerr << "[graph::compile] re-planned for " << shape_template.describe(*sizes)
                  << " (dynamic; no trace): " << plan.executor->graph().nodes().size()
                  << " nodes in " << std::fixed << std::setprecision(1) << ms << " ms; "
                  << plan.executor->memory().str() << "\n";
      }
      return plan;
    } catch (const std::exception& error) {
      if (explain()) {
        std::cerr << "[graph::compile] cannot re-plan for " << shape_template.describe(*sizes)
                  << ", tracing again: " << error.what() << "\n";
      }
      // Dropped once the trace succeeds: when it fails too, the size was the
      // function's error, not the template's.
      failed_template_ = templates_[t].shapes;
      return std::nullopt;
    }
  }
  return std::nullopt;
}

const CompiledFunction::Plan& CompiledFunction::plan_for(const TensorVector& inputs) {
  MetaVector signature;
  for (const Tensor& input : inputs) {
    TESSERA_CHECK(input.defined(), "[graph::compile] an input is undefined");
    signature.push_back(input.meta());
  }
  note_marks(inputs);
  for (size_t p = 0; p < plans_.size(); ++p) {
    const MetaVector& cached = plans_[p].signature;
    if (cached.size() != signature.size() ||
        !std::equal(cached.begin(), cached.end(), signature.begin(), same_signature)) {
      continue;
    }
    std::string changed;
    for (const auto& guard : plans_[p].executor->graph().host().guards) {
      changed = guard();
      if (!changed.empty()) break;
    }
    if (changed.empty()) {
      last_ = static_cast<int>(p);
      plans_[p].used = ++calls_;
      return plans_[p];
    }
    // The host state the plan baked in changed: trace again in its place
    // (and make the dynamic dims' template again too).
    templates_.clear();
    if (explain()) {
      std::cerr << "[graph::compile] compiling again (compile " << compiles_ + 1 << "): " << changed
                << "\n";
    }
    plans_[p] = compile_plan(signature, inputs);
    ++compiles_;
    last_ = static_cast<int>(p);
    plans_[p].used = ++calls_;
    return plans_[p];
  }
  failed_template_.reset();
  if (!dynamic_refused_ && has_marks()) {
    if (std::optional<Plan> plan = replan(signature)) return add_plan(std::move(*plan));
  }
  if (explain() && !plans_.empty()) {
    std::cerr << "[graph::compile] compiling again (compile " << compiles_ + 1
              << "): " << what_changed(plans_.back().signature, signature) << "\n";
  }
  Plan plan = compile_plan(signature, inputs);
  ++compiles_;
  if (failed_template_) {
    std::erase_if(templates_, [&](const Template& t) { return t.shapes == failed_template_; });
    failed_template_.reset();
  }
  return add_plan(std::move(plan));
}

const CompiledFunction::Plan& CompiledFunction::add_plan(Plan plan) {
  plan.used = ++calls_;
  if (plans_.size() >= kMaxPlans) {
    const auto oldest = std::min_element(
        plans_.begin(), plans_.end(), [](const Plan& a, const Plan& b) { return a.used < b.used; });
    if (explain()) {
      std::cerr << "[graph::compile] " << kMaxPlans
                << " plans kept: dropping the one least recently used\n";
    }
    plans_.erase(oldest);
  }
  plans_.push_back(std::move(plan));
  last_ = static_cast<int>(plans_.size()) - 1;
  return plans_.back();
}

TensorVector CompiledFunction::operator()(const TensorVector& inputs) {
  if (options_.auto_parallel && !parallel_plan_) {
    // Plans before anything runs; the laid-out step replaces the caller's.
    ParallelStep parallel = auto_parallelizer()(fn_, inputs, options_);
    fn_ = std::move(parallel.step);
    parallel_plan_ = std::move(parallel.plan);
  }
  if (!warmed_up_) {
    warmed_up_ = true;
    note_marks(inputs);
    return fn_(inputs);  // makes lazily created state (optimizer buffers, gradients)
  }
  Plan& plan = plans_[static_cast<size_t>((plan_for(inputs), last_))];
  return plan.executor->run(inputs);
}

CompiledFunction::Plan CompiledFunction::compile_plan(const MetaVector& signature,
                                                      const TensorVector& inputs) {
  const auto start = std::chrono::steady_clock::now();
  Graph traced = trace(fn_, inputs);
  Graph optimised = run_passes(traced, options_.disabled_passes);
  bool made_template = false;
  if (!dynamic_refused_ && has_marks()) {
    // Trace at probe sizes too, so that later sizes re-plan without a trace:
    // the template of the optimised graph (every probe through the passes
    // too), or, when the passes treat the sizes differently, of the traced
    // graph (a re-plan then runs the passes). Marked dims of equal size
    // share one size; when that does not fit (a batch and a sequence length
    // that happen to be equal), the same dim of each input shares one.
    auto passes = [this](const Graph& graph) {
      return run_passes(graph, options_.disabled_passes, false);
    };
    // The probe traces serve both templates.
    auto make = [&](const std::vector<DynamicSize>& sizes) -> Template {
      const ProbeTraces probes = trace_probes(fn_, signature, sizes);
      try {
        return {std::make_shared<const ShapeTemplate>(signature, optimised, sizes, probes, passes),
                -1, true};
      } catch (const Error& error) {
        if (explain()) {
          std::cerr << "[graph::compile] the optimised graph cannot be a template of the dynamic "
                    << "dims; re-plans will run the passes: " << error.what() << "\n";
        }
        return {std::make_shared<const ShapeTemplate>(signature, traced, sizes, probes), -1, false};
      }
    };
    try {
      const std::vector<DynamicSize> merged = group_sizes(signature, marks_);
      try {
        templates_.push_back(make(merged));
      } catch (const Error&) {
        std::vector<DynamicSize> by_dim = group_sizes(signature, marks_, true);
        if (by_dim.size() == merged.size()) throw;
        templates_.push_back(make(by_dim));
      }
      made_template = true;
    } catch (const Error& error) {
      dynamic_refused_ = true;
      std::string dims;
      for (size_t i = 0; i < marks_.size(); ++i) {
        for (int64_t dim : marks_[i]) {
          dims += (dims.empty() ? "" : ", ") + std::string("input ") + std::to_string(i) + " dim " +
                  std::to_string(dim);
        }
      }
      std::cerr << "[graph::compile] the dims marked dynamic (" << dims
                << ") cannot be dynamic in this function, so each size compiles on its own: "
                << error.what() << "\n";
    }
  }
  Plan plan{signature, std::make_shared<Executor>(std::move(optimised))};
  if (made_template) templates_.back().memory_variant = plan.executor->memory().variant;
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  compile_seconds_ += ms / 1e3;
  if (explain()) {
    std::cerr << "[graph::compile] compile " << compiles_ + 1 << ": "
              << plan.executor->graph().nodes().size() << " nodes"
              << (plan.executor->graph().is_global() ? " (this rank's part of a global step)" : "")
              << " in " << std::fixed << std::setprecision(1) << ms << " ms; "
              << plan.executor->memory().str() << "\n";
  }
  return plan;
}

const Graph& CompiledFunction::last_graph() const {
  TESSERA_CHECK(last_ >= 0,
                "[graph::compile] the function has not been compiled yet (the "
                "first call runs eagerly, the second compiles)");
  return plans_[static_cast<size_t>(last_)].executor->graph();
}

const MemoryPlan& CompiledFunction::last_memory_plan() const {
  (void)last_graph();  // the same check
  return plans_[static_cast<size_t>(last_)].executor->memory();
}

int64_t CompiledFunction::last_planned_peak_bytes() const {
  (void)last_graph();  // the same check
  return plans_[static_cast<size_t>(last_)].executor->planned_peak_bytes();
}

CompiledFunction compile(TracedFn fn, CompileOptions options) {
  return CompiledFunction(std::move(fn), std::move(options));
}

}  // namespace tessera::graph
