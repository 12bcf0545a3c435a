#include "tessera/graph/trace.h"

#include <unordered_map>

#include "tessera/core/grad_mode.h"
#include "tessera/core/rng.h"
#include "tessera/ops/dispatch.h"

namespace tessera::graph {

namespace {

// Records every call on its thread as a node of `graph`; runs only the
// inference (on meta stand-ins), never a kernel.
class Tracer final : public Handler {
 public:
  explicit Tracer(Graph& graph) : graph_(graph) {}
  const char* name() const override { return "graph-trace"; }

  void bind(const Tensor& tensor, int value) {
    ids_[tensor.impl_ptr().get()] = value;
    alive_.push_back(tensor);  // keeps the address from being reused
  }
  int lookup(const Tensor& tensor) const {
    auto it = ids_.find(tensor.impl_ptr().get());
    return it == ids_.end() ? -1 : it->second;
  }
  const std::string& last_op() const { return last_op_; }

  TensorVector run(const OpDef& op, const TensorVector& inputs, const Attrs& attrs) override {
    last_op_ = op.name;
    std::vector<int> ids;
    MetaVector logical;
    TensorVector stand_ins;
    for (size_t i = 0; i < inputs.size(); ++i) {
      const int id = value_of(inputs[i], op, i);
      ids.push_back(id);
      logical.push_back(graph_.value(id).meta);
      stand_ins.push_back(inputs[i].to_meta());
    }
    check_devices(op, logical);
    const MetaVector output_metas = op.infer(logical, attrs);
    // The outputs the function goes on with: meta tensors (a view aliases
    // its input's stand-in, an in-place op returns the stand-ins it wrote).
    TensorVector outputs = redispatch(op, stand_ins, attrs);
    const int node = graph_.add_node(op, attrs, ids, output_metas, random_count(op, attrs));
    const std::vector<int>& produced = graph_.nodes()[static_cast<size_t>(node)].outputs;
    for (size_t o = 0; o < outputs.size(); ++o) bind(outputs[o], produced[o]);
    // A tensor written in place is the new value from here on.
    for (size_t o = 0; o < op.writes.size(); ++o) {
      bind(inputs.at(static_cast<size_t>(op.writes[o])), produced[o]);
    }
    return outputs;
  }

 private:
  int value_of(const Tensor& tensor, const OpDef& op, size_t index) {
    const int known = lookup(tensor);
    if (known >= 0) return known;
    TESSERA_CHECK(!tensor.is_meta(), "[graph::trace] ", op.name, " input ", index,
                  " is a meta tensor the traced function was not given and did not make");
    TESSERA_CHECK(!tensor.is_global(), "[graph::trace] ", op.name, " input ", index,
                  " is a global tensor; tracing global tensors is not supported yet");
    const bool number =
        tensor.dim() == 0 && tensor.device().type == DeviceType::cpu && !tensor.requires_grad();
    const int id = number ? graph_.add_constant(tensor) : graph_.add_variable(tensor);
    bind(tensor, id);
    return id;
  }

  // The counters a random op reserved from the default generator just
  // before its call: the run reserves as many again each time.
  static uint64_t random_count(const OpDef& op, const Attrs& attrs) {
    if (op.kind != OpKind::random || !attrs.has("offset")) return 0;
    const Generator& generator = default_generator();
    TESSERA_CHECK(attrs.has("seed") && static_cast<uint64_t>(attrs.i("seed")) == generator.seed(),
                  "[graph::trace] ", op.name, " draws from a generator of its own; a graph's ",
                  "random ops draw from the default generator for now");
    return generator.offset() - static_cast<uint64_t>(attrs.i("offset"));
  }

  // The check call() makes on real inputs, made here on the values' own
  // devices (the stand-ins are all meta).
  static void check_devices(const OpDef& op, const MetaVector& metas) {
    auto number = [](const TensorMeta& m) { return m.shape.empty() && m.device == Device{}; };
    for (const TensorMeta& meta : metas) {
      TESSERA_CHECK(meta.device == metas[0].device || number(meta) || number(metas[0]), "[",
                    op.name, "] inputs are on different devices: ", device_str(metas[0].device),
                    " and ", device_str(meta.device));
    }
  }

  Graph& graph_;
  std::unordered_map<const TensorImpl*, int> ids_;
  std::vector<Tensor> alive_;
  std::string last_op_;
};

}  // namespace

Graph trace(const TracedFn& fn, const TensorVector& examples) {
  Graph graph;
  Tracer tracer(graph);
  TensorVector placeholders;
  for (const Tensor& example : examples) {
    TESSERA_CHECK(example.defined(), "[graph::trace] an example input is undefined");
    TESSERA_CHECK(!example.is_global(), "[graph::trace] example inputs are local tensors for now");
    Tensor placeholder = Tensor::empty(example.shape(), example.dtype(), Device::meta());
    tracer.bind(placeholder, graph.add_input(example.meta()));
    placeholders.push_back(placeholder);
  }
  TensorVector results;
  {
    // Forward functions only for now: no tape is recorded while tracing.
    NoGradGuard no_grad;
    HandlerScope scope(tracer);
    try {
      results = fn(placeholders);
    } catch (const Error& error) {
      const std::string what = error.what();
      const bool read = what.find("has no data") != std::string::npos;
      TESSERA_FAIL("[graph::trace] the traced function failed",
                   tracer.last_op().empty() ? "" : " after op " + tracer.last_op(), ": ", what,
                   read ? " (a traced function cannot read tensor values: item(), to_vector() "
                          "or branching on a value make the graph depend on data)"
                        : "");
    }
  }
  std::vector<int> outputs;
  for (size_t i = 0; i < results.size(); ++i) {
    const int id = tracer.lookup(results[i]);
    TESSERA_CHECK(id >= 0, "[graph::trace] output ", i,
                  " was not computed by the traced function from its inputs or variables");
    outputs.push_back(id);
  }
  graph.set_outputs(std::move(outputs));
  return graph;
}

TensorVector run(const Graph& graph, const TensorVector& inputs) {
  TESSERA_CHECK(inputs.size() == graph.inputs().size(), "[graph::run] the graph takes ",
                graph.inputs().size(), " inputs, got ", inputs.size());
  std::vector<Tensor> env(graph.values().size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    const TensorMeta& expected = graph.value(graph.inputs()[i]).meta;
    TESSERA_CHECK(inputs[i].shape() == expected.shape && inputs[i].dtype() == expected.dtype &&
                      inputs[i].device() == expected.device,
                  "[graph::run] input ", i, " is ", meta_str(inputs[i].meta()),
                  " but the graph was traced for ", meta_str(expected));
    env[static_cast<size_t>(graph.inputs()[i])] = inputs[i];
  }
  for (const Variable& variable : graph.variables()) {
    env[static_cast<size_t>(variable.value)] = variable.tensor;
  }
  for (const auto& [id, tensor] : graph.constants()) env[static_cast<size_t>(id)] = tensor;
  for (const Node& node : graph.nodes()) {
    TensorVector args;
    for (int id : node.inputs) args.push_back(env[static_cast<size_t>(id)]);
    TensorVector results;
    if (node.random_count > 0) {
      Generator& generator = default_generator();
      Attrs drawn = node.attrs;
      drawn.set("seed", static_cast<int64_t>(generator.seed()))
          .set("offset", static_cast<int64_t>(generator.reserve(node.random_count)));
      results = call(*node.op, args, drawn);
    } else {
      results = call(*node.op, args, node.attrs);
    }
    for (size_t o = 0; o < node.outputs.size(); ++o) {
      env[static_cast<size_t>(node.outputs[o])] = results[o];
    }
  }
  TensorVector outputs;
  for (int id : graph.outputs()) outputs.push_back(env[static_cast<size_t>(id)]);
  return outputs;
}

}  // namespace tessera::graph
