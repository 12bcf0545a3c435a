#include <memory>
#include <unordered_map>
#include <unordered_set>

#include "tessera/graph/fused.h"
#include "tessera/graph/passes/passes.h"

namespace tessera::graph {

namespace {

MetaVector metas_of(const Graph& graph, const std::vector<int>& ids) {
  MetaVector metas;
  for (int id : ids) metas.push_back(graph.value(id).meta);
  return metas;
}

bool fusible_node(const Graph& graph, const Node& node) {
  return !node.fused && node.random_count == 0 && node.draw < 0 &&
         fusible(*node.op, metas_of(graph, node.inputs), metas_of(graph, node.outputs));
}

// Builds the fused graph node by node, renumbering values as rebuild does.
class Fuser {
 public:
  explicit Fuser(const Graph& graph) : graph_(graph), copier_(graph) {
    // Who reads each value, to know which of a group's values escape it.
    for (size_t n = 0; n < graph.nodes().size(); ++n) {
      for (int input : graph.nodes()[n].inputs) readers_[input].push_back(static_cast<int>(n));
    }
    for (int id : graph.escaping()) escaping_.insert(id);
  }

  Graph run() {
    std::vector<int> all(graph_.nodes().size());
    for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<int>(i);
    fuse(all);
    return copier_.finish();
  }

 private:
  // Emits `sequence` (node indices in an order that runs) with its fusible
  // nodes grouped. A group is a run of fusible nodes of one output shape;
  // a node between its members that needs none of them and has no side
  // effects is moved before it, and those moved nodes are grouped the same
  // way (so a chain of [B, T, 1] statistics interleaved with a [B, T, C]
  // chain that reads them becomes two groups, not many single nodes).
  void fuse(const std::vector<int>& sequence) {
    std::vector<int> group;    // fusible nodes with one output shape
    std::vector<int> hoisted;  // nodes between them that need none of them
    std::unordered_set<int> produced;
    auto close = [&] {
      if (!hoisted.empty()) fuse(std::vector<int>(hoisted));
      if (group.size() == 1) emit(group[0]);
      if (group.size() > 1) emit_fused(group);
      group.clear();
      hoisted.clear();
      produced.clear();
    };
    for (int n : sequence) {
      const Node& node = graph_.nodes()[static_cast<size_t>(n)];
      const bool fusible_here = fusible_node(graph_, node);
      const bool fits =
          fusible_here && (group.empty() || graph_.value(node.outputs[0]).meta.shape ==
                                                graph_.value(first_output(group[0])).meta.shape);
      if (fits) {
        group.push_back(n);
        produced.insert(node.outputs[0]);
        continue;
      }
      // A node that reads nothing of the open group and has no side effects
      // can run before it, so the group stays one run of nodes.
      bool independent = !group.empty() && !has_side_effects(node);
      for (int input : node.inputs) independent = independent && !produced.count(input);
      if (independent) {
        hoisted.push_back(n);
        continue;
      }
      close();
      if (fusible_here) {
        group.push_back(n);
        produced.insert(node.outputs[0]);
      } else {
        emit(n);
      }
    }
    close();
  }

  int first_output(int n) const { return graph_.nodes()[static_cast<size_t>(n)].outputs[0]; }
  void emit(int n) { copier_.copy_node(n); }

  void emit_fused(const std::vector<int>& group) {
    auto program = std::make_shared<FusedProgram>();
    std::unordered_map<int, int> operand_of;  // old value id -> operand index
    std::vector<int> inputs;                  // new ids of the fused node's inputs
    std::vector<int> external;                // their old ids
    std::unordered_set<int> in_group(group.begin(), group.end());
    // First the external inputs, so every step's operands are known.
    for (int n : group) {
      for (int input : graph_.nodes()[static_cast<size_t>(n)].inputs) {
        const Value& value = graph_.value(input);
        const bool inside = value.kind == ValueKind::node && in_group.count(value.node);
        if (inside || operand_of.count(input)) continue;
        operand_of[input] = static_cast<int>(external.size());
        external.push_back(input);
        inputs.push_back(copier_.mapped(input));
      }
    }
    program->num_inputs = static_cast<int>(external.size());
    std::vector<int> result_values;  // old ids of the values that leave the group
    for (size_t s = 0; s < group.size(); ++s) {
      const Node& node = graph_.nodes()[static_cast<size_t>(group[s])];
      FusedStep step{node.op, tile_kernel(node.op->name), node.attrs, {}};
      for (int input : node.inputs) step.operands.push_back(operand_of.at(input));
      program->steps.push_back(std::move(step));
      const int value = node.outputs[0];
      operand_of[value] = program->num_inputs + static_cast<int>(s);
      bool leaves = escaping_.count(value) > 0;
      auto readers = readers_.find(value);
      if (readers != readers_.end()) {
        for (int reader : readers->second) leaves = leaves || !in_group.count(reader);
      }
      if (leaves) {
        program->results.push_back(static_cast<int>(s));
        result_values.push_back(value);
      }
    }
    plan_program(*program);
    const MetaVector metas = metas_of(graph_, result_values);
    const int added = copier_.out().add_fused_node(std::move(program), inputs, metas);
    const std::vector<int>& outputs = copier_.out().nodes()[static_cast<size_t>(added)].outputs;
    for (size_t o = 0; o < outputs.size(); ++o) copier_.map(result_values[o], outputs[o]);
  }

  const Graph& graph_;
  GraphCopier copier_;
  std::unordered_map<int, std::vector<int>> readers_;
  std::unordered_set<int> escaping_;
};

}  // namespace

Graph fuse_elementwise(const Graph& graph) {
  return Fuser(graph).run();
}

}  // namespace tessera::graph
