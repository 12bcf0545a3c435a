#pragma once

// Graph passes: each takes a graph and returns the rewritten one, so a
// test can print the IR before and after. One file each in this folder.

#include <string>
#include <vector>

#include "tessera/graph/ir.h"

namespace tessera::graph {

// Whether a node must run even when nothing reads its outputs, and must not
// be merged with an equal one: it writes a tensor in place, draws from the
// generator (dropping or merging it would change every later draw), or
// moves data between processes.
bool has_side_effects(const Node& node);

// Removes the nodes whose outputs no output and no side-effecting node
// needs (passes/dead_code.cpp).
Graph eliminate_dead_code(const Graph& graph);

// Merges nodes that run the same op with equal attributes on the same
// inputs: the later one's outputs become the earlier one's
// (passes/common_subexpressions.cpp).
Graph eliminate_common_subexpressions(const Graph& graph);

// Rewrites what algebra says is the same: x * 1, x + 0 and x - 0 (a 0-d
// full() operand that changes neither shape nor dtype) become x; a reshape
// of a reshape reads the first one's input; a permute that undoes the
// permute it reads becomes that permute's input
// (passes/algebraic_simplification.cpp). x * 1, x + 0 and x - 0 are
// forwarded to x only when the graph writes nothing in place and the result
// is not a graph output, so no tensor eager code kept apart becomes shared;
// a permute that undoes a permute is a view of x already, and is forwarded
// unless it is returned. Run
// dead-code elimination after it to drop what no longer has readers.
// A sum of slice_backward nodes whose slices tile one dim (the gradient of
// a fused q/k/v projection's three slices) becomes one cat of their
// gradients.
Graph simplify_algebra(const Graph& graph);

// Fuses runs of consecutive elementwise nodes of one output shape (f32 on
// the CPU, operands that broadcast to that shape) into one
// fused_elementwise node that runs them tile by tile (graph/fused.h). Nodes
// between them that need none of their values and have no side effects
// move before the group, and are grouped in turn. Only the values read
// after the group, or returned, are written to memory
// (passes/elementwise_fusion.cpp).
Graph fuse_elementwise(const Graph& graph);

// Recomputes a cheap value instead of keeping it: an elementwise node
// (one with a tile kernel, no random draws) or a layer_norm whose output
// is read again long after its earlier readers (a forward activation that
// backward reads) runs again just before those late readers, which then
// read the copy. Only where every input of the node is live at that point
// anyway and unwritten since, so the copy has the same numbers and keeps
// nothing else longer; the original's memory is free in between
// (passes/rematerialization.cpp).
Graph rematerialize(const Graph& graph);

// Evaluates, once at compile time, the nodes whose inputs are all
// constants (a full() of a number, arithmetic on numbers) and whose results
// are small, and makes their results constants (passes/constant_folding.cpp).
// Nodes with side effects are left alone.
Graph fold_constants(const Graph& graph);

// Where the values a run makes live (passes/memory_planning.cpp): one arena
// per plan holds every CPU tensor a node makes except the graph's outputs,
// at offsets whose lifetimes (from the node that makes the value to the
// last node that reads it or a view of it) never overlap. The gradients a
// run leaves on parameters live to its end (and stay until the next run
// overwrites them); a graph that adds to the last run's gradients keeps
// them out. Eight placements (four orders, each with and without in-place
// writes) are tried and the smallest arena kept.
struct MemoryPlan {
  std::vector<int64_t> offsets;  // per value: byte offset in the arena, or -1
  std::vector<int> roots;        // per value: the value whose memory it is
  // Per root value: the last node that needs its memory (reads it or a view
  // of it, or an asynchronous collective reading it may still run); the
  // node count for memory kept to the end of the run or past it (outputs,
  // gradients); -1 for none.
  std::vector<int> last_use;
  int64_t arena_bytes = 0;       // the planned peak
  int64_t lower_bound = 0;       // the most bytes live at one node
  int64_t unplanned_bytes = 0;   // the same values without any reuse
  std::string heuristic;         // the placement that won
  int variant = -1;              // its number, for plan_memory(graph, variant)
  // Per node: where its kernel's workspace is in the arena, or -1.
  std::vector<int64_t> workspace_offsets;
  // Per node: for an out-of-place collective, which the executor may run
  // asynchronously, the node before which its outputs must be complete
  // (the last that uses them; its inputs' memory is kept until then), or
  // -1. See may_run_async.
  std::vector<int> collective_ready;
  // "arena 1.50 MiB (largest first, best fit); lower bound 1.50 MiB (gap 0.0%); ..."
  std::string str() const;
};
// Tries several placements (with and without in-place writes, several
// orders) and keeps the smallest arena; with `variant` >= 0, only that one
// (a re-plan of a dynamic dim keeps the placement its compile chose).
// `workspace_bytes` (per node, or empty): the scratch memory each node's
// kernel takes (Workspace::peak_bytes), live only while the node runs.
MemoryPlan plan_memory(const Graph& graph, int variant = -1,
                       const std::vector<int64_t>& workspace_bytes = {});
// Whose memory each value is: a view's or an in-place write's output is
// its input's memory, its root (a value that is its own memory is its own
// root); and per root, the last node that reads it or a view of it (-1:
// none). Memory planning and rematerialization both start from it.
struct ValueRoots {
  std::vector<int> root;      // per value
  std::vector<int> last_use;  // per root
};
ValueRoots value_roots(const Graph& graph);

// Whether the node is a collective that the executor may launch
// asynchronously, to overlap the nodes that do not need it: a gradient
// bucket's all_reduce_ and the out-of-place group collectives (all_reduce,
// all_gather, reduce_scatter, all_to_all, broadcast), not send and recv.
bool may_run_async(const Node& node);

// Copies a graph's inputs, variables and constants into a new graph, then
// the nodes a pass copies or adds, renumbering values; finish() adds the
// outputs, gradient writes and host state of the original, read through
// the new numbering. The passes build on it.
class GraphCopier {
 public:
  explicit GraphCopier(const Graph& from);
  // The new id of an old value (raises when its producer was not copied).
  int mapped(int old_id) const;
  bool has(int old_id) const { return id_.at(static_cast<size_t>(old_id)) >= 0; }
  void map(int old_id, int new_id) { id_.at(static_cast<size_t>(old_id)) = new_id; }
  // Copies node n, reading `inputs` (old ids; its own when empty).
  void copy_node(int n, const std::vector<int>& inputs = {});
  Graph& out() { return out_; }
  Graph finish();

 private:
  const Graph& from_;
  Graph out_;
  std::vector<int> id_;
};

// The graph with only the nodes `keep` marks, and every read of value v
// replaced by `replacement[v]` (its own id when not replaced). A non-empty
// `node_inputs[n]` gives node n new inputs (before replacement). Values are
// renumbered in order; the passes build on it.
Graph rebuild(const Graph& graph, const std::vector<bool>& keep,
              const std::vector<int>& replacement,
              const std::vector<std::vector<int>>& node_inputs = {});

}  // namespace tessera::graph
