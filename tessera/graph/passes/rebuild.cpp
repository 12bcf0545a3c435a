#include "tessera/graph/passes/passes.h"

namespace tessera::graph {

bool has_side_effects(const Node& node) {
  return !node.op->writes.empty() || node.op->kind == OpKind::random ||
         node.op->kind == OpKind::collective;
}

GraphCopier::GraphCopier(const Graph& from) : from_(from), id_(from.values().size(), -1) {
  for (int input : from.inputs()) {
    map(input, out_.add_input(from.value(input).meta, from.value(input).global));
  }
  for (const Variable& variable : from.variables()) {
    map(variable.value, out_.add_variable(variable.tensor, variable.grad_of));
  }
  for (const Constant& constant : from.constants()) {
    map(constant.value, out_.add_constant(constant.tensor, constant.exact));
  }
}

int GraphCopier::mapped(int old_id) const {
  const int id = id_.at(static_cast<size_t>(old_id));
  TESSERA_CHECK(id >= 0, "[graph] value %", old_id, " is read but its producer was removed");
  return id;
}

void GraphCopier::copy_node(int n, const std::vector<int>& inputs) {
  const Node& node = from_.nodes().at(static_cast<size_t>(n));
  std::vector<int> ids;
  for (int input : inputs.empty() ? node.inputs : inputs) ids.push_back(mapped(input));
  MetaVector metas;
  for (int output : node.outputs) metas.push_back(from_.value(output).meta);
  const int added =
      node.fused ? out_.add_fused_node(node.fused, ids, metas)
                 : out_.add_node(*node.op, node.attrs, ids, metas, node.random_count, node.draw);
  for (const auto& refresh : node.refresh) out_.add_refresh(added, refresh);
  const std::vector<int>& outputs = out_.nodes()[static_cast<size_t>(added)].outputs;
  for (size_t o = 0; o < outputs.size(); ++o) map(node.outputs[o], outputs[o]);
}

Graph GraphCopier::finish() {
  std::vector<int> outputs;
  for (int output : from_.outputs()) outputs.push_back(mapped(output));
  out_.set_outputs(std::move(outputs), from_.output_globals());
  for (const GradWrite& write : from_.grad_writes()) {
    out_.add_grad_write(write.leaf, write.value >= 0 ? mapped(write.value) : -1, write.global);
  }
  out_.host() = from_.host();
  return std::move(out_);
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
  GraphCopier copier(graph);
  for (size_t n = 0; n < graph.nodes().size(); ++n) {
    if (!keep[n]) continue;
    const Node& node = graph.nodes()[n];
    const bool rewired = !node_inputs.empty() && !node_inputs[n].empty();
    std::vector<int> inputs;
    for (int input : rewired ? node_inputs[n] : node.inputs) {
      inputs.push_back(replacement[static_cast<size_t>(input)]);
    }
    copier.copy_node(static_cast<int>(n), inputs);
  }
  // A replaced value is read through its replacement everywhere.
  for (size_t v = 0; v < graph.values().size(); ++v) {
    const int target = replacement[v];
    if (target != static_cast<int>(v) && copier.has(target)) {
      copier.map(static_cast<int>(v), copier.mapped(target));
    }
  }
  return copier.finish();
}

}  // namespace tessera::graph
