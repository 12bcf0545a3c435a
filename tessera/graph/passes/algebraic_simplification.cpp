#include <algorithm>

#include "tessera/graph/passes/passes.h"
#include "tessera/ops/op.h"

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

// A sum of slice_backward nodes (the gradient of slices of one tensor)
// whose slices tile the whole dim, read by nothing else, is the pieces
// joined: cat(pieces, dim). Each element of the sum is one piece's element
// plus zeros, so the values are the sum's (but for the sign of a zero: a
// piece's -0 stays -0 where the sum made +0). The three slices of a fused
// q/k/v projection give such a sum in every attention layer's backward.
class SliceSumJoiner {
 public:
  explicit SliceSumJoiner(const Graph& graph) : graph_(graph), readers_(graph.values().size(), 0) {
    for (const Node& node : graph.nodes()) {
      for (int input : node.inputs) ++readers_[static_cast<size_t>(input)];
    }
    for (int id : graph.escaping()) readers_[static_cast<size_t>(id)] += 2;  // never absorbed
  }

  Graph run() {
    const size_t num_nodes = graph_.nodes().size();
    std::vector<std::vector<int>> pieces(num_nodes);  // per root add: the cat's inputs
    std::vector<int> dims(num_nodes, 0);
    std::vector<bool> absorbed(num_nodes, false);
    for (size_t n = num_nodes; n-- > 0;) {  // outermost adds first
      const Node& node = graph_.nodes()[n];
      if (absorbed[n] || !is_plain_add(node)) continue;
      std::vector<int> adds, leaves;
      collect(static_cast<int>(n), adds, leaves);
      int dim = 0;
      std::vector<int> joined = tiling(node, leaves, dim);
      if (joined.empty()) continue;
      pieces[n] = std::move(joined);
      dims[n] = dim;
      for (int add : adds) absorbed[static_cast<size_t>(add)] = add != static_cast<int>(n);
    }
    GraphCopier copier(graph_);
    const OpDef& cat = find_op("cat");
    for (size_t n = 0; n < num_nodes; ++n) {
      if (absorbed[n]) continue;
      if (pieces[n].empty()) {
        copier.copy_node(static_cast<int>(n));
        continue;
      }
      std::vector<int> inputs;
      for (int piece : pieces[n]) inputs.push_back(copier.mapped(piece));
      Attrs attrs;
      attrs.set("dim", int64_t{dims[n]});
      const int out = graph_.nodes()[n].outputs[0];
      const int added = copier.out().add_node(cat, attrs, inputs, {graph_.value(out).meta});
      copier.map(out, copier.out().nodes()[static_cast<size_t>(added)].outputs[0]);
    }
    return copier.finish();
  }

 private:
  // add(a, b) of one shape and dtype, local to this process.
  bool is_plain_add(const Node& node) const {
    if (node.op->name != "add" || node.inputs.size() != 2 || node.outputs.size() != 1) return false;
    const Value& out = graph_.value(node.outputs[0]);
    if (out.global.is_global()) return false;
    for (int input : node.inputs) {
      const TensorMeta& in = graph_.value(input).meta;
      if (in.shape != out.meta.shape || in.dtype != out.meta.dtype) return false;
    }
    return true;
  }

  // The add tree under node n: the adds whose only reader is their parent,
  // and the values they sum.
  void collect(int n, std::vector<int>& adds, std::vector<int>& leaves) const {
    adds.push_back(n);
    for (int input : graph_.nodes()[static_cast<size_t>(n)].inputs) {
      const Value& value = graph_.value(input);
      if (value.kind == ValueKind::node && readers_[static_cast<size_t>(input)] == 1 &&
          is_plain_add(graph_.nodes()[static_cast<size_t>(value.node)])) {
        collect(value.node, adds, leaves);
      } else {
        leaves.push_back(input);
      }
    }
  }

  // When every leaf is a slice_backward read only here, of the sum's shape
  // along one dim with step 1, and their slices tile that dim: their
  // gradients in slice order (and the dim); else empty.
  std::vector<int> tiling(const Node& root, const std::vector<int>& leaves, int& dim) const {
    const TensorMeta& out = graph_.value(root.outputs[0]).meta;
    std::vector<std::pair<int64_t, const Node*>> slices;
    for (int leaf : leaves) {
      const Value& value = graph_.value(leaf);
      if (value.kind != ValueKind::node || readers_[static_cast<size_t>(leaf)] != 1) return {};
      const Node& node = graph_.nodes()[static_cast<size_t>(value.node)];
      if (node.op->name != "slice_backward" || node.attrs.i("step") != 1 ||
          node.attrs.ints("input_shape") !=
              std::vector<int64_t>(out.shape.begin(), out.shape.end())) {
        return {};
      }
      slices.emplace_back(node.attrs.i("start"), &node);
    }
    std::sort(slices.begin(), slices.end(),
              [](const auto& a, const auto& b) { return a.first < b.first; });
    const int64_t rank = static_cast<int64_t>(out.shape.size());
    int64_t d = slices.front().second->attrs.i("dim");
    d = d < 0 ? d + rank : d;
    if (d < 0 || d >= rank) return {};
    int64_t next = 0;
    std::vector<int> pieces;
    for (const auto& [start, node] : slices) {
      const int64_t node_dim = node->attrs.i("dim");
      if ((node_dim < 0 ? node_dim + rank : node_dim) != d || start != next) return {};
      next = node->attrs.i("end");
      pieces.push_back(node->inputs[0]);
    }
    if (next != out.shape[static_cast<size_t>(d)]) return {};
    dim = static_cast<int>(d);
    return pieces;
  }

  const Graph& graph_;
  std::vector<int> readers_;
};

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
  return SliceSumJoiner(rebuild(graph, keep, replacement, node_inputs)).run();
}

}  // namespace tessera::graph
