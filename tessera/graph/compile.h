#pragma once

// graph::compile: an eager function traced into a graph once per input
// signature, optimised by the passes, and run from then on.
//
//   auto forward = graph::compile([&](const TensorVector& in) -> TensorVector {
//     return {model->forward(in[0])};
//   });
//   Tensor y = forward({x})[0];   // traces and compiles on the first call
//
// Plans are cached by every input's shape, dtype and device. A call with a
// new signature compiles once more; with TESSERA_GRAPH_EXPLAIN=1 in the
// environment it says on stderr which field of which input changed.
// Forward (inference) functions for now: tracing records no tape.

#include <string>
#include <vector>

#include "tessera/graph/ir.h"
#include "tessera/graph/trace.h"

namespace tessera::graph {

struct CompileOptions {
  // Passes to skip, by name (pass_names() lists them).
  std::vector<std::string> disabled_passes;
};

// The passes compile runs, in order.
const std::vector<std::string>& pass_names();
// Runs every pass not disabled; an unknown name is an error listing the
// valid ones.
Graph run_passes(const Graph& graph, const std::vector<std::string>& disabled = {});

class CompiledFunction {
 public:
  CompiledFunction(TracedFn fn, CompileOptions options);

  TensorVector operator()(const TensorVector& inputs);

  // How many times the function was traced and compiled.
  int compiles() const { return compiles_; }
  // The graph the last call ran.
  const Graph& last_graph() const;

 private:
  struct Plan {
    MetaVector signature;
    Graph graph;
  };
  const Plan& plan_for(const TensorVector& inputs);

  TracedFn fn_;
  CompileOptions options_;
  std::vector<Plan> plans_;
  int compiles_ = 0;
  int last_ = -1;
};

CompiledFunction compile(TracedFn fn, CompileOptions options = {});

}  // namespace tessera::graph
