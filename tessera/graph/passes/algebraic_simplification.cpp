#include "tessera/graph/passes/passes.h"

namespace tessera::graph {

namespace {

// The node producing `value`, or null for inputs, variables and constants.
const Node* producer(const Graph& graph, int value) {
  const Value& v = graph.value(value);
  return v.kind == ValueKind::node ? &graph.nodes()[static_cast<size_t>(v.node)] : nullptr;
}

// Whether `value` is a 0-d full() of `number`.
bool is_scalar(const Graph& graph, int value, double number) {
  const Node* node = producer(graph, value);
  return node != nullptr && node->op->name == "full" && graph.value(value).meta.shape.empty() &&
         node->attrs.has("value") && node->attrs.f("value") == number;
}

bool same_meta(const TensorMeta& a, const TensorMeta& b) {
  return a.shape == b.shape && a.dtype == b.dtype && a.device == b.device;
}

// The operand that x op identity leaves unchanged, or -1.
int identity_operand(const Graph& graph, const Node& node) {
  const std::string& name = node.op->name;
  if (node.inputs.size() != 2 || node.outputs.size() != 1) return -1;
  const TensorMeta& out = graph.value(node.outputs[0]).meta;
  const int a = node.inputs[0], b = node.inputs[1];
  auto unchanged = [&](int x) { return same_meta(graph.value(x).meta, out); };
  if (name == "mul") {
    if (is_scalar(graph, b, 1.0) && unchanged(a)) return a;
    if (is_scalar(graph, a, 1.0) && unchanged(b)) return b;
  } else if (name == "add") {
    if (is_scalar(graph, b, 0.0) && unchanged(a)) return a;
    if (is_scalar(graph, a, 0.0) && unchanged(b)) return b;
  } else if (name == "sub") {
    if (is_scalar(graph, b, 0.0) && unchanged(a)) return a;
  }
  return -1;
}

bool is_identity(const std::vector<int64_t>& dims) {
  for (size_t d = 0; d < dims.size(); ++d) {
    if (dims[d] != static_cast<int64_t>(d)) return false;
  }
  return true;
}

}  // namespace

Graph simplify_algebra(const Graph& graph) {
  const size_t num_nodes = graph.nodes().size();
  std::vector<int> replacement(graph.values().size());
  for (size_t v = 0; v < replacement.size(); ++v) replacement[v] = static_cast<int>(v);
  std::vector<bool> keep(num_nodes, true);
  std::vector<std::vector<int>> node_inputs(num_nodes);
  // Forwarding a result to its operand makes them one tensor where eager
  // made two. That is only safe when nothing writes either afterwards (the
  // graph writes nothing in place) and the result is not a graph output
  // (the caller may write it, and must not write the operand through it).
  bool writes = false;
  for (const Node& node : graph.nodes()) writes = writes || !node.op->writes.empty();
  std::vector<bool> is_output(graph.values().size(), false);
  for (int output : graph.escaping()) is_output[static_cast<size_t>(output)] = true;
  auto may_forward = [&](const Node& node) {
    return !writes && !is_output[static_cast<size_t>(node.outputs[0])];
  };
  for (size_t n = 0; n < num_nodes; ++n) {
    const Node& node = graph.nodes()[n];
    if (has_side_effects(node)) continue;
    const int operand = may_forward(node) ? identity_operand(graph, node) : -1;
    if (operand >= 0) {
      replacement[static_cast<size_t>(node.outputs[0])] = replacement[static_cast<size_t>(operand)];
      keep[n] = false;
      continue;
    }
    if (node.op->name == "permute" && is_identity(node.attrs.ints("dims")) &&
        !is_output[static_cast<size_t>(node.outputs[0])]) {
      // A permute that moves no dim is its input (a view of the same layout).
      replacement[static_cast<size_t>(node.outputs[0])] =
          replacement[static_cast<size_t>(node.inputs[0])];
      keep[n] = false;
      continue;
    }
    const Node* inner = node.inputs.empty() ? nullptr : producer(graph, node.inputs[0]);
    if (inner == nullptr || inner->op != node.op) continue;
    if (node.op->name == "reshape") {
      // reshape(reshape(x, s1), s2) is reshape(x, s2); along a chain, the
      // inner reshape already reads its own chain's start.
      const auto& inner_rewired =
          node_inputs[static_cast<size_t>(graph.value(node.inputs[0]).node)];
      node_inputs[n] = inner_rewired.empty() ? inner->inputs : inner_rewired;
    } else if (node.op->name == "permute") {
      // permute(permute(x, p), q) is x when q undoes p.
      const std::vector<int64_t>& p = inner->attrs.ints("dims");
      const std::vector<int64_t>& q = node.attrs.ints("dims");
      bool undoes = p.size() == q.size();
      for (size_t d = 0; undoes && d < q.size(); ++d) {
        undoes = p[static_cast<size_t>(q[d])] == static_cast<int64_t>(d);
      }
      // The double permute is a view of x already, so forwarding it shares
      // nothing eager kept apart: only a returned value must stay its own.
      if (undoes && !is_output[static_cast<size_t>(node.outputs[0])]) {
        replacement[static_cast<size_t>(node.outputs[0])] =
            replacement[static_cast<size_t>(inner->inputs[0])];
        keep[n] = false;
      }
    }
  }
  return rebuild(graph, keep, replacement, node_inputs);
}

}  // namespace tessera::graph
