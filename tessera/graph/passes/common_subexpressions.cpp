#include <unordered_map>

#include "tessera/graph/passes/passes.h"

namespace tessera::graph {

namespace {

// What makes two nodes interchangeable: the op, its attributes and the
// values it reads (after earlier merges).
struct NodeKey {
  const OpDef* op;
  const Attrs* attrs;
  std::vector<int> inputs;

  bool operator==(const NodeKey& other) const {
    return op == other.op && inputs == other.inputs && *attrs == *other.attrs;
  }
};

struct NodeKeyHash {
  size_t operator()(const NodeKey& key) const {
    size_t h = std::hash<const void*>()(key.op) ^ (key.attrs->hash() * 31);
    for (int input : key.inputs) h = h * 1000003 ^ std::hash<int>()(input);
    return h;
  }
};

}  // namespace

Graph eliminate_common_subexpressions(const Graph& graph) {
  std::vector<int> replacement(graph.values().size());
  for (size_t v = 0; v < replacement.size(); ++v) replacement[v] = static_cast<int>(v);
  std::vector<bool> keep(graph.nodes().size(), true);
  std::unordered_map<NodeKey, size_t, NodeKeyHash> seen;
  for (size_t n = 0; n < graph.nodes().size(); ++n) {
    const Node& node = graph.nodes()[n];
    if (has_side_effects(node)) continue;
    NodeKey key{node.op, &node.attrs, {}};
    for (int input : node.inputs) key.inputs.push_back(replacement[static_cast<size_t>(input)]);
    auto [it, inserted] = seen.try_emplace(std::move(key), n);
    if (inserted) continue;
    const Node& first = graph.nodes()[it->second];
    for (size_t o = 0; o < node.outputs.size(); ++o) {
      replacement[static_cast<size_t>(node.outputs[o])] = first.outputs[o];
    }
    keep[n] = false;
  }
  return rebuild(graph, keep, replacement);
}

}  // namespace tessera::graph
