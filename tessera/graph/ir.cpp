#include "tessera/graph/ir.h"

#include <algorithm>
#include <sstream>

namespace tessera::graph {

namespace {

std::string attr_value_str(const AttrValue& value) {
  std::ostringstream out;
  std::visit(
      [&](const auto& v) {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, std::vector<int64_t>>) {
          out << shape_str(Shape(v));
        } else if constexpr (std::is_same_v<T, DType>) {
          out << dtype_name(v);
        } else if constexpr (std::is_same_v<T, bool>) {
          out << (v ? "true" : "false");
        } else if constexpr (std::is_same_v<T, std::string>) {
          out << '"' << v << '"';
        } else {
          out << v;
        }
      },
      value);
  return out.str();
}

std::string attrs_str(const Attrs& attrs) {
  if (attrs.items().empty()) return "";
  std::ostringstream out;
  out << " {";
  bool first = true;
  for (const auto& [name, value] : attrs.items()) {
    out << (first ? "" : ", ") << name << "=" << attr_value_str(value);
    first = false;
  }
  out << "}";
  return out.str();
}

std::string ids_str(const std::vector<int>& ids) {
  std::ostringstream out;
  for (size_t i = 0; i < ids.size(); ++i) out << (i ? ", %" : "%") << ids[i];
  return out.str();
}

// " (shard of f32[16, 8] cpu:[0, 1] S(0))" for a value that is
// this rank's shard of a global tensor; "" otherwise.
std::string shard_str(const TensorMeta& global) {
  if (!global.is_global()) return "";
  return " (shard of " + meta_str(global) + ")";
}

}  // namespace

const char* value_kind_name(ValueKind kind) {
  switch (kind) {
    case ValueKind::input:
      return "input";
    case ValueKind::variable:
      return "variable";
    case ValueKind::constant:
      return "constant";
    case ValueKind::node:
      return "node";
  }
  return "?";
}

std::string meta_str(const TensorMeta& meta) {
  std::ostringstream out;
  out << dtype_name(meta.dtype) << shape_str(meta.shape);
  if (meta.device != Device{}) out << " " << device_str(meta.device);
  if (meta.is_global()) out << " " << placement_str(meta.placement) << " " << nd_sbp_str(meta.sbp);
  return out.str();
}

int Graph::add_value(Value value) {
  values_.push_back(std::move(value));
  return static_cast<int>(values_.size()) - 1;
}

Tensor shard_of(const Tensor& tensor) {
  return tensor.is_global() ? tensor.local_shard() : tensor;
}

Tensor wrap_shard(const Tensor& shard, const TensorMeta& global) {
  if (!global.is_global()) return shard;
  return make_global(shard, global.shape, global.dtype, global.placement, global.sbp);
}

int Graph::add_input(const TensorMeta& meta, const TensorMeta& global) {
  Value value{meta, ValueKind::input, -1, 0, global};
  const int id = add_value(std::move(value));
  inputs_.push_back(id);
  return id;
}

int Graph::add_variable(const Tensor& tensor, const Tensor& grad_of) {
  Value value{tensor.meta(), ValueKind::variable, -1, 0, TensorMeta{}};
  // A meta parameter of a model described, not built (TraceOptions::
  // meta_variables) stands for a CPU tensor, as the inputs beside it do.
  if (tensor.is_meta()) value.meta.device = Device{};
  if (tensor.is_global()) {
    const Tensor shard = tensor.local_shard();
    TESSERA_CHECK(shard.defined(), "[graph::trace] a global tensor of shape ",
                  shape_str(tensor.shape()), " on ", placement_str(tensor.placement()),
                  " has no shard on this rank; a traced function runs on ranks of its placements");
    value.global = value.meta;
    value.meta = shard.meta();
  }
  const int id = add_value(std::move(value));
  variables_.push_back({id, tensor, grad_of});
  return id;
}

const OpDef& fused_elementwise_op() {
  static const OpDef def = [] {
    OpDef d;
    d.name = "fused_elementwise";
    d.kind = OpKind::elementwise;
    d.differentiable = false;
    return d;
  }();
  return def;
}

int Graph::add_fused_node(std::shared_ptr<const FusedProgram> program, std::vector<int> inputs,
                          const MetaVector& outputs) {
  TESSERA_CHECK(program != nullptr && static_cast<size_t>(program->num_inputs) == inputs.size() &&
                    program->results.size() == outputs.size(),
                "[graph] a fused node's program does not match its ", inputs.size(), " inputs and ",
                outputs.size(), " outputs");
  std::string ops;
  for (const FusedStep& step : program->steps) ops += (ops.empty() ? "" : ", ") + step.op->name;
  const int node =
      add_node(fused_elementwise_op(), Attrs{{"ops", "[" + ops + "]"}}, std::move(inputs), outputs);
  nodes_[static_cast<size_t>(node)].fused = std::move(program);
  return node;
}

void Graph::add_refresh(int node, std::function<void(Attrs&)> refresh) {
  TESSERA_CHECK(node >= 0 && static_cast<size_t>(node) < nodes_.size(), "[graph] an attr refresh ",
                "for node ", node, ", but the graph has ", nodes_.size(), " nodes");
  nodes_[static_cast<size_t>(node)].refresh.push_back(std::move(refresh));
}

void Graph::set_outputs(std::vector<int> outputs, std::vector<TensorMeta> globals) {
  TESSERA_CHECK(globals.empty() || globals.size() == outputs.size(), "[graph] ", globals.size(),
                " output layouts for ", outputs.size(), " outputs");
  globals.resize(outputs.size());
  outputs_ = std::move(outputs);
  output_globals_ = std::move(globals);
}

bool Graph::is_global() const {
  auto global = [](const TensorMeta& meta) { return meta.is_global(); };
  return std::any_of(values_.begin(), values_.end(),
                     [&](const Value& value) { return global(value.global); }) ||
         std::any_of(output_globals_.begin(), output_globals_.end(), global);
}

void Graph::add_grad_write(const Tensor& leaf, int value, const TensorMeta& global) {
  TESSERA_CHECK(value >= -1 && value < static_cast<int>(values_.size()), "[graph] a gradient ",
                "write of value %", value, ", but the graph has ", values_.size(), " values");
  grad_writes_.push_back({leaf, value, global});
}

std::vector<int> Graph::escaping() const {
  std::vector<int> ids = outputs_;
  for (const GradWrite& write : grad_writes_) {
    if (write.value >= 0) ids.push_back(write.value);
  }
  return ids;
}

int Graph::add_constant(const Tensor& tensor, std::optional<double> exact) {
  const int id = add_value({tensor.meta(), ValueKind::constant, -1, 0, TensorMeta{}});
  constants_.push_back({id, tensor, exact});
  return id;
}

int Graph::add_node(const OpDef& op, const Attrs& attrs, std::vector<int> inputs,
                    const MetaVector& outputs, uint64_t random_count, int draw) {
  const int node = static_cast<int>(nodes_.size());
  for (int input : inputs) {
    TESSERA_CHECK(input >= 0 && static_cast<size_t>(input) < values_.size(), "[graph] node ",
                  op.name, " reads value %", input, ", but the graph has ", values_.size(),
                  " values");
  }
  Node added;
  added.op = &op;
  added.attrs = attrs;
  added.inputs = std::move(inputs);
  added.random_count = random_count;
  added.draw = draw;
  num_draws_ = std::max(num_draws_, draw + 1);
  for (size_t o = 0; o < outputs.size(); ++o) {
    added.outputs.push_back(
        add_value({outputs[o], ValueKind::node, node, static_cast<int>(o), TensorMeta{}}));
  }
  nodes_.push_back(std::move(added));
  return node;
}

std::string Graph::str() const {
  std::ostringstream out;
  out << "graph(";
  for (size_t i = 0; i < inputs_.size(); ++i) {
    out << (i ? ", " : "") << "%" << inputs_[i] << ": " << meta_str(value(inputs_[i]).meta)
        << shard_str(value(inputs_[i]).global);
  }
  out << ") {\n";
  for (const Variable& variable : variables_) {
    out << "  %" << variable.value << ": " << meta_str(value(variable.value).meta)
        << (variable.grad_of.defined() ? " = variable (a leaf's grad)" : " = variable")
        << shard_str(value(variable.value).global) << "\n";
  }
  for (const Constant& constant : constants_) {
    const int id = constant.value;
    const Tensor& tensor = constant.tensor;
    out << "  %" << id << ": " << meta_str(value(id).meta) << " = constant";
    if (tensor.numel() == 1 && !tensor.is_meta()) out << " " << tensor.item<double>();
    out << "\n";
  }
  for (const Node& node : nodes_) {
    out << "  " << ids_str(node.outputs) << ": ";
    for (size_t o = 0; o < node.outputs.size(); ++o) {
      out << (o ? ", " : "") << meta_str(value(node.outputs[o]).meta);
    }
    out << " = " << node.op->name << "(" << ids_str(node.inputs) << ")" << attrs_str(node.attrs)
        << "\n";
  }
  for (const GradWrite& write : grad_writes_) {
    out << "  " << meta_str(write.leaf.meta()) << " leaf .grad = ";
    if (write.value >= 0) {
      out << "%" << write.value << shard_str(write.global) << "\n";
    } else {
      out << "none\n";
    }
  }
  out << "  return ";
  for (size_t o = 0; o < outputs_.size(); ++o) {
    out << (o ? ", %" : "%") << outputs_[o] << shard_str(output_globals_[o]);
  }
  out << "\n}\n";
  return out.str();
}

std::string Graph::dot() const {
  std::ostringstream out;
  out << "digraph tessera {\n  node [shape=box, fontname=monospace];\n";
  for (int id : inputs_) out << "  v" << id << " [shape=ellipse, label=\"%" << id << " input\"];\n";
  for (const Variable& variable : variables_) {
    out << "  v" << variable.value << " [shape=ellipse, label=\"%" << variable.value
        << " variable\"];\n";
  }
  for (const Constant& constant : constants_) {
    out << "  v" << constant.value << " [shape=ellipse, label=\"%" << constant.value
        << " constant\"];\n";
  }
  for (size_t n = 0; n < nodes_.size(); ++n) {
    out << "  n" << n << " [label=\"" << nodes_[n].op->name << "\"];\n";
  }
  auto source = [&](int id) {
    const Value& v = value(id);
    std::ostringstream name;
    if (v.kind == ValueKind::node) {
      name << "n" << v.node;
    } else {
      name << "v" << id;
    }
    return name.str();
  };
  for (size_t n = 0; n < nodes_.size(); ++n) {
    for (int input : nodes_[n].inputs) {
      out << "  " << source(input) << " -> n" << n << " [label=\"" << meta_str(value(input).meta)
          << "\"];\n";
    }
  }
  for (int id : outputs_) {
    out << "  out" << id << " [shape=ellipse, label=\"return %" << id << "\"];\n";
    out << "  " << source(id) << " -> out" << id << ";\n";
  }
  out << "}\n";
  return out.str();
}

}  // namespace tessera::graph
