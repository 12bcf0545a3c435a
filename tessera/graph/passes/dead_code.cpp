#include "tessera/graph/passes/passes.h"

namespace tessera::graph {

Graph eliminate_dead_code(const Graph& graph) {
  const size_t num_nodes = graph.nodes().size();
  std::vector<bool> needed_value(graph.values().size(), false);
  std::vector<bool> keep(num_nodes, false);
  for (int output : graph.escaping()) needed_value[static_cast<size_t>(output)] = true;
  // Backwards: a node is kept when one of its outputs is needed or it has
  // side effects; then everything it reads is needed.
  for (size_t n = num_nodes; n-- > 0;) {
    const Node& node = graph.nodes()[n];
    bool used = has_side_effects(node);
    for (int output : node.outputs) used = used || needed_value[static_cast<size_t>(output)];
    if (!used) continue;
    keep[n] = true;
    for (int input : node.inputs) needed_value[static_cast<size_t>(input)] = true;
  }
  std::vector<int> same(graph.values().size());
  for (size_t v = 0; v < same.size(); ++v) same[v] = static_cast<int>(v);
  return rebuild(graph, keep, same);
}

}  // namespace tessera::graph
