#include "tessera/graph/passes/passes.h"

namespace tessera::graph {

bool has_side_effects(const Node& node) {
  return !node.op->writes.empty() || node.op->kind == OpKind::random ||
         node.op->kind == OpKind::collective;
}

Graph rebuild(const Graph& graph, const std::vector<bool>& keep,
              const std::vector<int>& replacement,
              const std::vector<std::vector<int>>& node_inputs) {
  TESSERA_CHECK(keep.size() == graph.nodes().size() && replacement.size() == graph.values().size(),
                "[graph::rebuild] got ", keep.size(), " node flags and ", replacement.size(),
                " replacements for a graph of ", graph.nodes().size(), " nodes and ",
                graph.values().size(), " values");
  TESSERA_CHECK(node_inputs.empty() || node_inputs.size() == graph.nodes().size(),
                "[graph::rebuild] got new inputs for ", node_inputs.size(), " nodes of ",
                graph.nodes().size());
  Graph out;
  std::vector<int> id(graph.values().size(), -1);  // old value id -> new
  auto resolve = [&](int value) {
    int target = replacement[static_cast<size_t>(value)];
    const int mapped = id[static_cast<size_t>(target)];
    TESSERA_CHECK(mapped >= 0, "[graph::rebuild] value %", value, " is read but its producer ",
                  "was removed");
    return mapped;
  };
  for (int input : graph.inputs()) {
    id[static_cast<size_t>(input)] = out.add_input(graph.value(input).meta);
  }
  for (const Variable& variable : graph.variables()) {
    id[static_cast<size_t>(variable.value)] = out.add_variable(variable.tensor);
  }
  for (const auto& [value, tensor] : graph.constants()) {
    id[static_cast<size_t>(value)] = out.add_constant(tensor);
  }
  for (size_t n = 0; n < graph.nodes().size(); ++n) {
    if (!keep[n]) continue;
    const Node& node = graph.nodes()[n];
    const bool rewired = !node_inputs.empty() && !node_inputs[n].empty();
    std::vector<int> inputs;
    for (int input : rewired ? node_inputs[n] : node.inputs) inputs.push_back(resolve(input));
    MetaVector metas;
    for (int output : node.outputs) metas.push_back(graph.value(output).meta);
    const int added = out.add_node(*node.op, node.attrs, inputs, metas, node.random_count);
    const std::vector<int>& outputs = out.nodes()[static_cast<size_t>(added)].outputs;
    for (size_t o = 0; o < outputs.size(); ++o) {
      id[static_cast<size_t>(node.outputs[o])] = outputs[o];
    }
  }
  std::vector<int> outputs;
  for (int output : graph.outputs()) outputs.push_back(resolve(output));
  out.set_outputs(std::move(outputs));
  return out;
}

}  // namespace tessera::graph
