#include "tessera/graph/ir.h"

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

int Graph::add_input(const TensorMeta& meta) {
  const int id = add_value({meta, ValueKind::input});
  inputs_.push_back(id);
  return id;
}

int Graph::add_variable(const Tensor& tensor) {
  const int id = add_value({tensor.meta(), ValueKind::variable});
  variables_.push_back({id, tensor});
  return id;
}

int Graph::add_constant(const Tensor& tensor) {
  const int id = add_value({tensor.meta(), ValueKind::constant});
  constants_.emplace_back(id, tensor);
  return id;
}

int Graph::add_node(const OpDef& op, const Attrs& attrs, std::vector<int> inputs,
                    const MetaVector& outputs, uint64_t random_count) {
  const int node = static_cast<int>(nodes_.size());
  for (int input : inputs) {
    TESSERA_CHECK(input >= 0 && static_cast<size_t>(input) < values_.size(), "[graph] node ",
                  op.name, " reads value %", input, ", but the graph has ", values_.size(),
                  " values");
  }
  Node added{&op, attrs, std::move(inputs), {}, random_count};
  for (size_t o = 0; o < outputs.size(); ++o) {
    added.outputs.push_back(add_value({outputs[o], ValueKind::node, node, static_cast<int>(o)}));
  }
  nodes_.push_back(std::move(added));
  return node;
}

std::string Graph::str() const {
  std::ostringstream out;
  out << "graph(";
  for (size_t i = 0; i < inputs_.size(); ++i) {
    out << (i ? ", " : "") << "%" << inputs_[i] << ": " << meta_str(value(inputs_[i]).meta);
  }
  out << ") {\n";
  for (const Variable& variable : variables_) {
    out << "  %" << variable.value << ": " << meta_str(value(variable.value).meta)
        << " = variable\n";
  }
  for (const auto& [id, tensor] : constants_) {
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
  out << "  return " << ids_str(outputs_) << "\n}\n";
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
  for (const auto& [id, tensor] : constants_) {
    out << "  v" << id << " [shape=ellipse, label=\"%" << id << " constant\"];\n";
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
