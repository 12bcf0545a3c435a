#pragma once

// Tracing: runs an eager function once on placeholders (meta tensors of the
// example inputs' shapes) under a mode handler that records every op call
// as a node instead of running it. Tensors the function reads that it was
// not given (parameters, buffers, optimizer state) become variables; 0-d
// CPU numbers become constants. A backward() inside the function is traced
// too: its gradient ops become nodes, and the gradients it leaves on
// parameters become the graph's gradient writes. Reading a traced tensor's
// values (item(), to_vector()) raises, since a placeholder has none: the
// plan must not depend on them.

#include <functional>

#include "tessera/graph/ir.h"

namespace tessera::graph {

using TracedFn = std::function<TensorVector(const TensorVector&)>;

// The graph of `fn` for inputs like `examples` (their metas; the values are
// not read).
Graph trace(const TracedFn& fn, const TensorVector& examples);

// Runs the graph eagerly, node by node, on real inputs (an interpreter:
// the reference the compiled executor is checked against). Writes to
// variables land in the captured tensors, and the traced gradients on their
// leaves. `run_index` counts the runs since the trace: the trace made the
// host changes of run 0 itself (an optimizer's step counts), so later runs
// repeat them, and advance counting attrs (OpDef::counter_attr) by as much.
TensorVector run(const Graph& graph, const TensorVector& inputs, int64_t run_index = 0);

// Sets a random node's seed and offset for this run: a new draw reserves
// its counters from the default generator, a replay takes its draw's
// (`draws` holds the run's draws, by Node::draw).
void set_draw(Attrs& attrs, const Node& node, std::vector<std::pair<int64_t, int64_t>>& draws);

}  // namespace tessera::graph
