#pragma once

// The executor: runs an optimised graph with everything that does not
// change between runs worked out once (DESIGN §5). For each node it keeps
// the kernel, and the tensors its outputs are written to:
//
// - values no caller sees after the run live in one arena, at the offsets
//   the memory plan gave them (passes/memory_planning.cpp), so a run after
//   the first allocates no tensor memory for them;
// - so do the gradients a run leaves on parameters, which stay valid until
//   the next run overwrites them (as PyTorch's zero_grad(set_to_none=False)
//   reuses them);
// - so does each kernel's scratch memory (its Workspace: a convolution's
//   unfolded or reordered operands), live only while its node runs, once a
//   run has shown how much it takes: the first run's kernels take new
//   memory, and the run after plans the arena again with them;
// - the graph's outputs are new tensors every run, since the caller keeps
//   them;
// - views of tensors that do not change between runs (parameters, arena
//   values) are made once.
//
// Kernels are called directly, without the dispatcher's per-call inference
// and checks (the trace made them). Nodes the direct path does not cover
// (collectives, global or non-CPU tensors, 16-bit floats that compute
// widened) go through the dispatcher as the interpreter (graph::run) does.
//
// A collective that writes its input in place (the data-parallel gradient
// bucket's all_reduce_) is launched asynchronously where the backend runs
// collectives on a thread of their own (Gloo): the nodes after it that do
// not read the bucket (the rest of backward) run while it moves, and the
// first node that reads or writes its memory waits for it, as eager's
// dispatcher does. The bucket's memory is its own (the memory plan keeps
// what a collective writes out of the arena), so nothing else waits for
// it, and nothing else is written there while it is in flight.
//
// An out-of-place collective (a boxing's all_gather, a tensor-parallel
// all_reduce) is launched asynchronously the same way: its outputs are new
// memory that every reader waits for, and it reads its inputs while in
// flight, so the memory plan keeps their memory until the last node that
// uses its outputs, before which the executor waits for it. One whose input
// a node writes before then runs blocking.
// TESSERA_GRAPH_OVERLAP=0 runs every collective blocking.

#include <memory>

#include "tessera/graph/ir.h"
#include "tessera/graph/passes/passes.h"
#include "tessera/graph/trace.h"

namespace tessera::graph {

class Executor {
 public:
  // `memory_variant`: see plan_memory (-1: try every placement).
  explicit Executor(Graph graph, int memory_variant = -1);
  Executor(const Executor&) = delete;
  Executor& operator=(const Executor&) = delete;

  // One run, as graph::run makes it.
  TensorVector run(const TensorVector& inputs);

  const Graph& graph() const { return graph_; }
  const MemoryPlan& memory() const { return memory_; }
  // The most memory a run holds at once by this plan, as the allocator
  // reserves it: the arena, and the values made new each run (collectives'
  // results, the caller's outputs, values the plan did not place) while
  // they live, with the last run's such gradients, which their parameters
  // hold until this run writes new ones. Not counted: what kernels and
  // collectives take for themselves inside a node, tensors the graph reads
  // (its inputs and variables), and values that are global tensors (a
  // traced step's values are shards; a global one has no size here).
  int64_t planned_peak_bytes() const { return planned_peak_bytes_; }

 private:
  enum class StepKind : uint8_t { kernel, fused, view, dispatch };
  struct Step {
    StepKind kind = StepKind::dispatch;
    KernelFn kernel = nullptr;
    bool dynamic_attrs = false;  // random draws, counters, refreshed attrs
    bool async_collective = false;
    std::vector<int> awaits;     // async collectives (nodes) to complete before this one
    TensorVector view_inputs;    // the inputs the cached view was made from
    // Whether the view may be kept for the next run: its inputs' memory
    // is the arena's or a variable's, the same in every run.
    bool cache_view = false;
    // Values made new each run whose memory no later node needs: let go
    // after this node runs, as eager execution lets them go.
    std::vector<int> releases;
  };
  // How a node output's tensor is made: in the arena, or a new tensor each
  // run (none: a view's or an in-place write's, its input's memory).
  enum class Storage : uint8_t { arena, fresh, none };

  Tensor output_tensor(int value);
  // Makes `memory` the plan: a new arena, and every placed value's tensor
  // in it.
  void place(MemoryPlan memory);
  // Lets the arena go before a new one is made, so that the two are never
  // held at once (unless the caller keeps a tensor over it): the gradients
  // the last run left in it are unset, and the executor's views dropped.
  // A run that plans again and then fails leaves those gradients unset.
  // place() must follow it when the executor plans again.
  void release_arena();

  Graph graph_;
  int memory_variant_ = -1;
  // Per node: the most scratch memory its kernel took in a run (planned in
  // the arena from the run after).
  std::vector<int64_t> workspace_bytes_;
  bool workspace_grew_ = false;
  MemoryPlan memory_;
  std::vector<Step> steps_;
  std::vector<Storage> storage_;  // per value
  std::vector<Tensor> env_;       // per value: its tensor in the current run
  Tensor arena_;
  Draws draws_;
  int64_t planned_peak_bytes_ = 0;
};

}  // namespace tessera::graph
