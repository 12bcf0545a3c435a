#pragma once

// Graph passes: each takes a graph and returns the rewritten one, so a
// test can print the IR before and after. One file each in this folder.

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
// (passes/algebraic_simplification.cpp). A result is forwarded to its
// operand only when the graph writes nothing in place and the result is not
// a graph output, so no tensor eager code kept apart becomes shared. Run
// dead-code elimination after it to drop what no longer has readers.
Graph simplify_algebra(const Graph& graph);

// The graph with only the nodes `keep` marks, and every read of value v
// replaced by `replacement[v]` (its own id when not replaced). A non-empty
// `node_inputs[n]` gives node n new inputs (before replacement). Values are
// renumbered in order; the passes build on it.
Graph rebuild(const Graph& graph, const std::vector<bool>& keep,
              const std::vector<int>& replacement,
              const std::vector<std::vector<int>>& node_inputs = {});

}  // namespace tessera::graph
