#pragma once

// Tracing: runs an eager function once on placeholders (meta tensors of the
// example inputs' shapes) under a mode handler that records every op call
// as a node instead of running it. Tensors the function reads that it was
// not given (parameters, buffers) become variables; 0-d CPU numbers become
// constants. Reading a traced tensor's values (item(), to_vector()) raises,
// since a placeholder has none: the plan must not depend on them.

#include <functional>

#include "tessera/graph/ir.h"

namespace tessera::graph {

using TracedFn = std::function<TensorVector(const TensorVector&)>;

// The graph of `fn` for inputs like `examples` (their metas; the values are
// not read).
Graph trace(const TracedFn& fn, const TensorVector& examples);

// Runs the graph eagerly, node by node, on real inputs (an interpreter:
// the reference the compiled executor is checked against). Writes to
// variables land in the captured tensors.
TensorVector run(const Graph& graph, const TensorVector& inputs);

}  // namespace tessera::graph
