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
//
// A function of global tensors traces into this rank's part of the work:
// each global call runs through the global layer on stand-ins (global
// tensors around meta shards, core/shard_trace.h), so the graph holds the
// local ops on shards and the collectives of boxing and of the gradient
// buckets, in the order eager issues them on every rank. Global inputs,
// variables and outputs are their shards, marked with their layout
// (Value::global).

#include <functional>

#include "tessera/graph/ir.h"

namespace tessera::graph {

using TracedFn = std::function<TensorVector(const TensorVector&)>;

// The graph of `fn` for inputs like `examples` (their metas; the values are
// not read).
Graph trace(const TracedFn& fn, const TensorVector& examples);
struct TraceOptions {
  // Whether the function may read meta tensors it was not given (the
  // parameters of a model described, not built: planner/described_models.h).
  // Such a graph can be planned and printed, not run.
  bool meta_variables = false;
};

// The same for local inputs of these metas.
Graph trace(const TracedFn& fn, const MetaVector& inputs, const TraceOptions& options = {});

// Runs the graph eagerly, node by node, on real inputs (an interpreter:
// the reference the compiled executor is checked against). Writes to
// variables land in the captured tensors, and the traced gradients on their
// leaves, and every run makes the host changes the trace recorded (an
// optimizer's step counts), which the trace itself left undone.
TensorVector run(const Graph& graph, const TensorVector& inputs);

// Checks `inputs` against the graph's and puts them, and the variables'
// tensors for this run, into `env` (by value id).
void bind_inputs(const Graph& graph, const TensorVector& inputs, std::vector<Tensor>& env);

// The run's draws from the generator, by Node::draw: (seed, offset).
using Draws = std::vector<std::pair<int64_t, int64_t>>;
// Whether a node's attrs change from run to run: a random draw, or attrs
// the host refreshes (Node::refresh: a learning rate, a step count).
bool has_run_attrs(const Node& node);
// The node's attrs for this run: refreshed, and for a random node the seed
// and offset of its draw (a new draw reserves its counters from the default
// generator now, a replay takes its draw's).
Attrs run_attrs(const Node& node, Draws& draws);
// After a run: the gradients written to leaves, and the host effects.
void finish_run(const Graph& graph, const std::vector<Tensor>& env);

}  // namespace tessera::graph
