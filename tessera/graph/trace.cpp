#include "tessera/graph/trace.h"

#include <limits>
#include <unordered_map>

#include "tessera/core/grad_mode.h"
#include "tessera/core/rng.h"
#include "tessera/core/shard_trace.h"
#include "tessera/graph/fused.h"
#include "tessera/ops/dispatch.h"
#include "tessera/ops/layout_attrs.h"

namespace tessera::graph {

namespace {

// Records every call on its thread as a node of `graph`; runs only the
// inference (on meta stand-ins), never a kernel.
class Tracer final : public Handler {
 public:
  Tracer(Graph& graph, bool meta_variables) : graph_(graph), meta_variables_(meta_variables) {}
  const char* name() const override { return "graph-trace"; }

  void bind(const Tensor& tensor, int value) {
    give_identity(tensor);
    ids_[tensor.impl_ptr().get()] = value;
    alive_.push_back(tensor);  // keeps the address from being reused
    if (tensor.is_meta() && !tensor.is_global())
      aliases_[tensor.impl().storage.get()].push_back({value, tensor});
  }
  int lookup(const Tensor& tensor) const {
    auto it = ids_.find(tensor.impl_ptr().get());
    if (it != ids_.end()) return it->second;
    // An alias made outside the dispatcher (detach(), autograd's saved
    // outputs) shares its stand-in's storage, offset, shape and strides.
    if (!tensor.is_meta() || tensor.is_global() || !tensor.impl().storage) return -1;
    auto same = aliases_.find(tensor.impl().storage.get());
    if (same == aliases_.end()) return -1;
    const TensorImpl& t = tensor.impl();
    for (const auto& [value, known] : same->second) {
      const TensorImpl& k = known.impl();
      if (k.offset == t.offset && k.shape == t.shape && k.strides == t.strides &&
          k.dtype == t.dtype) {
        return value;
      }
    }
    return -1;
  }

  // A meta stand-in gets an empty storage of its own, which aliases made
  // outside the dispatcher share, so lookup() can tell what they alias.
  static void give_identity(const Tensor& tensor) {
    if (tensor.is_meta() && !tensor.is_global() && !tensor.impl().storage) {
      tensor.impl().storage = std::make_shared<Storage>(0, Device{});
    }
  }
  const std::string& last_op() const { return last_op_; }

  void host_effect(std::function<void()> effect) override {
    graph_.host().effects.push_back(std::move(effect));
  }
  void guard(std::function<std::string()> changed) override {
    graph_.host().guards.push_back(std::move(changed));
  }
  void refresh_attrs(std::function<void(Attrs&)> refresh) override {
    TESSERA_CHECK(!graph_.nodes().empty(), "[graph::trace] an attr refresh before any op call");
    graph_.add_refresh(static_cast<int>(graph_.nodes().size()) - 1, std::move(refresh));
  }

  // After the function returned: the gradients backward left on the
  // variables' leaves become the graph's gradient writes, and the leaves
  // get their real state back (no meta stand-in stays on a parameter).
  // Also run when tracing failed, with `record` false.
  void settle_gradients(bool record) {
    for (const Variable& variable : graph_.variables()) {
      TensorImpl& leaf = variable.tensor.impl();
      if (variable.grad_of.defined() || !leaf.requires_grad) continue;
      auto had = had_grad_.find(&leaf);
      const std::shared_ptr<TensorImpl> before = had != had_grad_.end() ? had->second : nullptr;
      const bool had_grad = before != nullptr;
      if (leaf.grad && Tensor(leaf.grad).has_no_values()) {
        const Tensor grad(leaf.grad);
        const int id = lookup(shard_of(grad));
        leaf.grad = before;  // the run sets the traced one
        if (!record) continue;
        TESSERA_CHECK(id >= 0, "[graph::trace] a leaf of shape ", shape_str(leaf.shape),
                      " got a gradient the tracer did not see being made");
        graph_.add_grad_write(variable.tensor, id, grad.is_global() ? grad.meta() : TensorMeta{});
      } else if (record && !leaf.grad && had_grad) {
        graph_.add_grad_write(variable.tensor, -1);
      }
    }
  }

  TensorVector run(const OpDef& op, const TensorVector& inputs, const Attrs& attrs) override {
    last_op_ = op.name;
    if (is_global_call(op, inputs, attrs)) return run_global(op, inputs, attrs);
    std::vector<int> ids;
    MetaVector logical;
    TensorVector stand_ins;
    for (size_t i = 0; i < inputs.size(); ++i) {
      const int id = value_of(inputs[i], op, i);
      ids.push_back(id);
      logical.push_back(graph_.value(id).meta);
      stand_ins.push_back(inputs[i].to_meta());
      give_identity(stand_ins.back());
    }
    check_devices(op, logical);
    const MetaVector output_metas = op.infer(logical, attrs);
    // The outputs the function goes on with: meta tensors (a view aliases
    // its input's stand-in, an in-place op returns the stand-ins it wrote).
    // (The meta handler directly: a factory with no inputs would otherwise
    // reach the local handler and fill real memory.)
    TensorVector outputs = meta_handler().run(op, stand_ins, attrs);
    const auto [count, draw] = random_draw(op, attrs);
    const int node = graph_.add_node(op, attrs, ids, output_metas, count, draw);
    const std::vector<int>& produced = graph_.nodes()[static_cast<size_t>(node)].outputs;
    for (size_t o = 0; o < outputs.size(); ++o) bind(outputs[o], produced[o]);
    // A tensor written in place is the new value from here on.
    for (size_t o = 0; o < op.writes.size(); ++o) {
      bind(inputs.at(static_cast<size_t>(op.writes[o])), produced[o]);
    }
    return outputs;
  }

 private:
  static bool is_global_call(const OpDef& op, const TensorVector& inputs, const Attrs& attrs) {
    if (op.global_only || (inputs.empty() && has_layout_attrs(attrs))) return true;
    return std::any_of(inputs.begin(), inputs.end(), [](const Tensor& t) { return t.is_global(); });
  }

  // A call on global tensors runs as eager runs it (the global layer picks
  // the signature, boxes the inputs and calls the local op on the shards),
  // but on stand-ins and with this tracer on the stack again: the local
  // ops and the collectives of the boxing become the graph's nodes, in the
  // order every rank issues them. Real global tensors (parameters, state)
  // enter as stand-ins around variables of their shards.
  TensorVector run_global(const OpDef& op, const TensorVector& inputs, const Attrs& attrs) {
    TensorVector traced;
    for (const Tensor& input : inputs) {
      traced.push_back(input.is_global() && !input.has_no_values() ? stand_in_for(input) : input);
    }
    HandlerScope again(*this);
    return redispatch(op, traced, attrs);
  }

  // The stand-in of a real global tensor: a global tensor of its layout
  // around a meta stand-in of its shard, which is a variable of the graph.
  Tensor stand_in_for(const Tensor& global) {
    auto known = globals_.find(global.impl_ptr().get());
    if (known != globals_.end()) return known->second;
    const Tensor shard = global.local_shard();
    const int id = graph_.add_variable(global, leaf_whose_grad_is(global));
    if (global.requires_grad()) had_grad_[&global.impl()] = global.impl().grad;
    Tensor meta_shard = shard.to_meta();
    bind(meta_shard, id);
    Tensor stand_in = make_global(meta_shard, global.shape(), global.dtype(), global.placement(),
                                  global.nd_sbp());
    alive_.push_back(global);
    globals_.emplace(global.impl_ptr().get(), stand_in);
    return stand_in;
  }

  int value_of(const Tensor& tensor, const OpDef& op, size_t index) {
    const int known = lookup(tensor);
    if (known >= 0) return known;
    TESSERA_CHECK(meta_variables_ || !tensor.is_meta(), "[graph::trace] ", op.name, " input ",
                  index, " is a meta tensor the traced function was not given and did not make");
    TESSERA_CHECK(!tensor.is_global(), "[graph::trace] ", op.name, " input ", index,
                  " is a global tensor; tracing global tensors is not supported yet");
    const bool number =
        tensor.dim() == 0 && tensor.device().type == DeviceType::cpu && !tensor.requires_grad();
    int id = -1;
    if (number) {
      id = graph_.add_constant(tensor);
    } else {
      id = graph_.add_variable(tensor, leaf_whose_grad_is(tensor));
      if (tensor.requires_grad()) had_grad_[&tensor.impl()] = tensor.impl().grad;
    }
    bind(tensor, id);
    return id;
  }

  // The variable leaf whose .grad `tensor` is, if any: backward adds to an
  // existing gradient, and a run must read the leaf's gradient of that run.
  Tensor leaf_whose_grad_is(const Tensor& tensor) const {
    for (const Variable& variable : graph_.variables()) {
      const TensorImpl& leaf = variable.tensor.impl();
      if (leaf.requires_grad && leaf.grad.get() == tensor.impl_ptr().get()) return variable.tensor;
    }
    return Tensor();
  }

  // A random op's draw: the counters it reserved from the default generator
  // just before its call (the run reserves as many again each time), or,
  // for a call that reuses an earlier call's seed and offset (dropout's
  // gradient regenerating the forward's mask), that call's draw.
  std::pair<uint64_t, int> random_draw(const OpDef& op, const Attrs& attrs) {
    if (op.kind != OpKind::random || !attrs.has("offset")) return {0, -1};
    const Generator& generator = default_generator();
    TESSERA_CHECK(attrs.has("seed") && static_cast<uint64_t>(attrs.i("seed")) == generator.seed(),
                  "[graph::trace] ", op.name, " draws from a generator of its own; a graph's ",
                  "random ops draw from the default generator for now");
    const int64_t offset = attrs.i("offset");
    auto [it, fresh] = draws_.try_emplace(offset, static_cast<int>(draws_.size()));
    if (!fresh) return {0, it->second};
    return {generator.offset() - static_cast<uint64_t>(offset), it->second};
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
  bool meta_variables_ = false;  // TraceOptions::meta_variables
  std::unordered_map<const TensorImpl*, int> ids_;
  std::vector<Tensor> alive_;
  std::string last_op_;
  // Each leaf's .grad when the trace first saw it.
  std::unordered_map<const TensorImpl*, std::shared_ptr<TensorImpl>> had_grad_;
  std::unordered_map<const Storage*, std::vector<std::pair<int, Tensor>>> aliases_;
  std::unordered_map<int64_t, int> draws_;  // a traced offset -> its draw
  // Real global tensors the function read -> their stand-ins.
  std::unordered_map<const TensorImpl*, Tensor> globals_;
};

}  // namespace

namespace {

// An input of a trace: its shard's meta (a local input's own) and, for a
// global input, the global tensor's.
struct TraceInput {
  TensorMeta shard;
  TensorMeta global;
};

Graph trace_inputs(const TracedFn& fn, const std::vector<TraceInput>& inputs, bool meta_variables) {
  Graph graph;
  Tracer tracer(graph, meta_variables);
  // Global tensors made during the trace around stand-ins are not plans.
  ShardTraceScope shards;
  TensorVector placeholders;
  for (const TraceInput& input : inputs) {
    Tensor placeholder = Tensor::empty(input.shard.shape, input.shard.dtype, Device::meta());
    tracer.bind(placeholder, graph.add_input(input.shard, input.global));
    const TensorMeta& global = input.global;
    placeholders.push_back(global.is_global() ? make_global(placeholder, global.shape, global.dtype,
                                                            global.placement, global.sbp)
                                              : placeholder);
  }
  // The trace reserves counters for the random ops it records; the runs
  // reserve them again, so the generator goes back to where it was.
  Generator& generator = default_generator();
  const uint64_t seed = generator.seed(), offset = generator.offset();
  struct Restore {
    Generator& generator;
    uint64_t seed, offset;
    ~Restore() { generator.set_state(seed, offset); }
  } restore{generator, seed, offset};
  TensorVector results;
  {
    // Grad mode as the caller has it: the tape records the traced calls
    // (their outputs are stand-ins), and a backward() inside `fn` runs the
    // gradient ops through the tracer too.
    HandlerScope scope(tracer);
    try {
      results = fn(placeholders);
      tracer.settle_gradients(true);
    } catch (const Error& error) {
      tracer.settle_gradients(false);
      const std::string what = error.what();
      const bool read = what.find("has no data") != std::string::npos;
      TESSERA_FAIL("[graph::trace] the traced function failed",
                   tracer.last_op().empty() ? "" : " after op " + tracer.last_op(), ": ", what,
                   read ? " (a traced function cannot read tensor values: item(), to_vector() "
                          "or branching on a value make the graph depend on data)"
                        : "");
    } catch (...) {
      tracer.settle_gradients(false);  // no meta stand-in stays on a parameter
      throw;
    }
  }
  // A count the op keeps in an attr must not be baked into the graph: a
  // refresh of the node must set it.
  for (const Node& node : graph.nodes()) {
    bool refreshed = node.op->counter_attr.empty();
    if (!refreshed) {
      Attrs probe = node.attrs;
      probe.set(node.op->counter_attr, std::numeric_limits<int64_t>::min());
      for (const auto& refresh : node.refresh) refresh(probe);
      refreshed = probe.i(node.op->counter_attr) != std::numeric_limits<int64_t>::min();
    }
    TESSERA_CHECK(refreshed, "[graph::trace] ", node.op->name, " counts its calls in attr '",
                  node.op->counter_attr,
                  "', but its caller did not refresh it for each run (record_attr_refresh)");
  }
  std::vector<int> outputs;
  std::vector<TensorMeta> globals;
  for (size_t i = 0; i < results.size(); ++i) {
    const int id = tracer.lookup(shard_of(results[i]));
    TESSERA_CHECK(id >= 0, "[graph::trace] output ", i,
                  " was not computed by the traced function from its inputs or variables");
    outputs.push_back(id);
    globals.push_back(results[i].is_global() ? results[i].meta() : TensorMeta{});
  }
  graph.set_outputs(std::move(outputs), std::move(globals));
  return graph;
}

}  // namespace

Graph trace(const TracedFn& fn, const TensorVector& examples) {
  std::vector<TraceInput> inputs;
  for (const Tensor& example : examples) {
    TESSERA_CHECK(example.defined(), "[graph::trace] an example input is undefined");
    const Tensor shard = shard_of(example);
    TESSERA_CHECK(shard.defined(), "[graph::trace] global input ", inputs.size(),
                  " has no shard on this rank; a traced function runs on ranks of its placements");
    inputs.push_back({shard.meta(), example.is_global() ? example.meta() : TensorMeta{}});
  }
  return trace_inputs(fn, inputs, /*meta_variables=*/false);
}

Graph trace(const TracedFn& fn, const MetaVector& inputs, const TraceOptions& options) {
  std::vector<TraceInput> traced;
  for (const TensorMeta& meta : inputs) {
    TESSERA_CHECK(!meta.is_global(), "[graph::trace] traced from metas, inputs must be local");
    traced.push_back({meta, TensorMeta{}});
  }
  return trace_inputs(fn, traced, options.meta_variables);
}

bool has_run_attrs(const Node& node) {
  return node.draw >= 0 || !node.refresh.empty();
}

Attrs run_attrs(const Node& node, Draws& draws) {
  Attrs attrs = node.attrs;
  for (const auto& refresh : node.refresh) refresh(attrs);
  if (node.draw >= 0) {
    auto& [seed, offset] = draws.at(static_cast<size_t>(node.draw));
    if (node.random_count > 0) {
      Generator& generator = default_generator();
      seed = static_cast<int64_t>(generator.seed());
      offset = static_cast<int64_t>(generator.reserve(node.random_count));
    }
    attrs.set("seed", seed).set("offset", offset);
  }
  return attrs;
}

void finish_run(const Graph& graph, const std::vector<Tensor>& env) {
  for (const GradWrite& write : graph.grad_writes()) {
    write.leaf.impl().grad =
        write.value >= 0
            ? wrap_shard(env[static_cast<size_t>(write.value)], write.global).impl_ptr()
            : nullptr;
  }
  for (const auto& effect : graph.host().effects) effect();
}

void bind_inputs(const Graph& graph, const TensorVector& inputs, std::vector<Tensor>& env) {
  TESSERA_CHECK(inputs.size() == graph.inputs().size(), "[graph::run] the graph takes ",
                graph.inputs().size(), " inputs, got ", inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Value& value = graph.value(graph.inputs()[i]);
    const TensorMeta& expected = value.global.is_global() ? value.global : value.meta;
    const TensorMeta given = inputs[i].meta();
    TESSERA_CHECK(given.shape == expected.shape && given.dtype == expected.dtype &&
                      given.device == expected.device && given.placement == expected.placement &&
                      given.sbp == expected.sbp,
                  "[graph::run] input ", i, " is ", meta_str(given),
                  " but the graph was traced for ", meta_str(expected));
    env[static_cast<size_t>(graph.inputs()[i])] = shard_of(inputs[i]);
  }
  for (const Variable& variable : graph.variables()) {
    Tensor tensor = variable.tensor;
    if (variable.grad_of.defined()) {
      tensor = Tensor(variable.grad_of.impl().grad);
      TESSERA_CHECK(tensor.defined(), "[graph::run] the graph adds to a leaf's gradient (shape ",
                    shape_str(variable.grad_of.shape()), "), but the leaf has none now; ",
                    "it had one when the graph was traced");
    }
    env[static_cast<size_t>(variable.value)] = shard_of(tensor);
  }
}

TensorVector run(const Graph& graph, const TensorVector& inputs) {
  NoGradGuard no_grad;  // the graph holds its backward already
  std::vector<Tensor> env(graph.values().size());
  Draws draws(static_cast<size_t>(graph.num_draws()));
  bind_inputs(graph, inputs, env);
  for (const Constant& constant : graph.constants()) {
    env[static_cast<size_t>(constant.value)] = constant.tensor;
  }
  for (const Node& node : graph.nodes()) {
    TensorVector args;
    for (int id : node.inputs) args.push_back(env[static_cast<size_t>(id)]);
    TensorVector results;
    if (node.fused) {
      MetaVector metas;
      for (int output : node.outputs) metas.push_back(graph.value(output).meta);
      results = run_fused(*node.fused, args, metas);
    } else if (has_run_attrs(node)) {
      results = call(*node.op, args, run_attrs(node, draws));
    } else {
      results = call(*node.op, args, node.attrs);
    }
    for (size_t o = 0; o < node.outputs.size(); ++o) {
      env[static_cast<size_t>(node.outputs[o])] = results[o];
    }
  }
  finish_run(graph, env);
  TensorVector outputs;
  for (size_t o = 0; o < graph.outputs().size(); ++o) {
    outputs.push_back(
        wrap_shard(env[static_cast<size_t>(graph.outputs()[o])], graph.output_globals()[o]));
  }
  return outputs;
}

}  // namespace tessera::graph
