#include "tessera/core/grad_mode.h"
#include "tessera/graph/passes/passes.h"

namespace tessera::graph {

namespace {

// Larger results would make the plan hold a copy of every one.
constexpr int64_t kMaxFoldedElements = 1024;

}  // namespace

Graph fold_constants(const Graph& graph) {
  GraphCopier copier(graph);
  std::vector<Tensor> known(graph.values().size());  // constant values, by old id
  for (const Constant& constant : graph.constants()) {
    known[static_cast<size_t>(constant.value)] = constant.tensor;
  }
  std::vector<bool> escapes(graph.values().size(), false);
  for (int id : graph.escaping()) escapes[static_cast<size_t>(id)] = true;
  NoGradGuard no_grad;
  for (size_t n = 0; n < graph.nodes().size(); ++n) {
    const Node& node = graph.nodes()[n];
    bool foldable = !has_side_effects(node) && !node.fused && node.op->kind != OpKind::view;
    for (int input : node.inputs)
      foldable = foldable && known[static_cast<size_t>(input)].defined();
    for (int output : node.outputs) {
      const TensorMeta& meta = graph.value(output).meta;
      // A returned constant would be one tensor shared by every run's caller.
      foldable = foldable && !escapes[static_cast<size_t>(output)] && !meta.is_global() &&
                 meta.device == Device{} && numel(meta.shape) <= kMaxFoldedElements;
    }
    if (!foldable) {
      copier.copy_node(static_cast<int>(n));
      continue;
    }
    TensorVector args;
    for (int input : node.inputs) args.push_back(known[static_cast<size_t>(input)]);
    const TensorVector results = call(*node.op, args, node.attrs);
    // A number `full` rounded to its dtype keeps the host's double.
    std::optional<double> exact;
    if (node.op->name == "full" && results[0].dim() == 0 && is_floating(results[0].dtype())) {
      exact = node.attrs.f("value");
    }
    for (size_t o = 0; o < node.outputs.size(); ++o) {
      const auto id = static_cast<size_t>(node.outputs[o]);
      known[id] = results[o];
      copier.map(node.outputs[o], copier.out().add_constant(results[o], exact));
    }
  }
  return copier.finish();
}

}  // namespace tessera::graph
