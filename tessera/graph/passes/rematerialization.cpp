#include <algorithm>

#include "tessera/graph/passes/passes.h"
#include "tessera/ops/tile_kernels.h"

namespace tessera::graph {

namespace {

// Readers this many nodes after the last use before them read a recomputed
// copy. A count of nodes, not bytes, so that the choice does not change with
// a dynamic dim's size (the graphs at every size must have the same nodes).
constexpr int kMinGap = 8;

class Rematerializer {
 public:
  explicit Rematerializer(const Graph& graph)
      : graph_(graph),
        roots_(value_roots(graph)),
        writers_(graph.values().size()),
        escapes_(graph.values().size(), false),
        readers_(graph.values().size()) {
    const auto& nodes = graph.nodes();
    for (size_t n = 0; n < nodes.size(); ++n) {
      const Node& node = nodes[n];
      for (size_t o = 0; o < node.op->writes.size() && !node.fused; ++o) {
        const int target = root_[in(node.inputs.at(static_cast<size_t>(node.op->writes[o])))];
        writers_[static_cast<size_t>(target)].push_back(static_cast<int>(n));
      }
      for (int input : node.inputs) readers_[in(input)].push_back(static_cast<int>(n));
    }
    for (int id : graph.escaping()) escapes_[static_cast<size_t>(root_[in(id)])] = true;
  }

  Graph run() {
    const auto& nodes = graph_.nodes();
    // Per node: the nodes to recompute just before it.
    std::vector<std::vector<int>> recompute_before(nodes.size());
    for (size_t p = 0; p < nodes.size(); ++p) {
      const int first_late = late_reader(static_cast<int>(p));
      if (first_late >= 0)
        recompute_before[static_cast<size_t>(first_late)].push_back(static_cast<int>(p));
    }
    GraphCopier copier(graph_);
    for (size_t n = 0; n < nodes.size(); ++n) {
      // The copy's output takes the value's id from here on: the readers
      // after this point read it.
      for (int p : recompute_before[n]) copier.copy_node(p);
      copier.copy_node(static_cast<int>(n));
    }
    return copier.finish();
  }

 private:
  static size_t in(int value) { return static_cast<size_t>(value); }

  // The last node that reads `value` or a view made of it.
  int extent(int value) const {
    int last = -1;
    for (int reader : readers_[in(value)]) {
      const Node& node = graph_.nodes()[static_cast<size_t>(reader)];
      last = std::max(last, reader);
      if (node.op->view && !node.fused) last = std::max(last, extent(node.outputs[0]));
    }
    return last;
  }

  // Whether `value` holds at node `at` the numbers it held at node `from`:
  // nothing writes it in place in between (an optimizer's update of a
  // parameter comes after backward), and its memory is live there anyway
  // (read at or after `at`), so recomputing from it keeps nothing longer.
  bool alive_and_unchanged(int value, int from, int at) const {
    const Value& v = graph_.value(value);
    const auto root = static_cast<size_t>(root_[in(value)]);
    for (int writer : writers_[root]) {
      if (writer > from && writer < at) return false;
    }
    if (v.kind != ValueKind::node) return true;  // an input, variable or constant
    return escapes_[root] || last_use_[root] >= at;
  }

  // Ops cheap enough to run twice: elementwise ones (those with a tile
  // kernel: arithmetic, activations) and layer_norm, a few passes over rows.
  static bool cheap(const Node& node) {
    return (node.op->kind == OpKind::elementwise && tile_kernel(node.op->name) != nullptr) ||
           node.op->name == "layer_norm";
  }

  // For node p, when it is cheap to run again and its output is read again
  // long after its last earlier use: the first of those late readers (all
  // later readers then read the recomputed value); -1 otherwise.
  int late_reader(int p) const {
    const Node& node = graph_.nodes()[static_cast<size_t>(p)];
    if (node.fused || node.outputs.empty() || node.random_count != 0 || node.draw >= 0 ||
        has_side_effects(node) || !cheap(node)) {
      return -1;
    }
    // Every output is recomputed (layer_norm's statistics with its result).
    for (int output : node.outputs) {
      const TensorMeta& meta = graph_.value(output).meta;
      const auto root = static_cast<size_t>(root_[in(output)]);
      if (meta.is_global() || graph_.value(output).global.is_global() || meta.device != Device{} ||
          escapes_[root] || !writers_[root].empty()) {
        return -1;
      }
    }
    // Where the first output, the large one, is read: the widest gap
    // between one reader's extent and the next reader.
    const int value = node.outputs[0];
    const std::vector<int>& readers = readers_[in(value)];
    int covered = p, best_gap = 0, split = -1;
    for (int reader : readers) {
      if (reader - covered > best_gap) {
        best_gap = reader - covered;
        split = reader;
      }
      const Node& r = graph_.nodes()[static_cast<size_t>(reader)];
      covered = std::max(covered, r.op->view && !r.fused ? extent(r.outputs[0]) : reader);
    }
    if (split < 0 || best_gap < kMinGap || split == readers.front()) return -1;
    for (int input : node.inputs) {
      if (!alive_and_unchanged(input, p, split)) return -1;
    }
    return split;
  }

  const Graph& graph_;
  const ValueRoots roots_;
  const std::vector<int>& root_ = roots_.root;          // per value
  const std::vector<int>& last_use_ = roots_.last_use;  // per root
  std::vector<std::vector<int>> writers_;  // per root: the nodes that write it in place
  std::vector<bool> escapes_;              // per root: a graph output or left on a leaf
  std::vector<std::vector<int>> readers_;
};

}  // namespace

Graph rematerialize(const Graph& graph) {
  return Rematerializer(graph).run();
}

}  // namespace tessera::graph
