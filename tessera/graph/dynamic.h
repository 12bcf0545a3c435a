#pragma once

// Dynamic dims: a dim of a compiled function's input whose size may change
// from call to call (the batch, the sequence length) without a new trace.
//
//   Tensor x = graph::dynamic(batch.data, 0);   // returns batch.data, marked
//   step({x, graph::dynamic(batch.target, 0)});
//
// The first compile with a marked dim traces the function at the given
// sizes and, to learn how the graph depends on them, at more sizes: a
// probe and a check for one dynamic size, four more traces for two. Every
// number of the graph (a value's dim, a reshape's target, a factory's
// shape, a number the function computed, a random op's counter count) must
// be the same affine function of the sizes at all of them; with two
// dynamic sizes, of both and their product. A later call whose only change
// is in marked dims re-plans from that template: the numbers are evaluated
// at the new sizes, every node's shapes are inferred again and checked
// against them, and the memory planner runs; nothing is traced.
// graph::compile fits the template to the graph after its passes (the
// probe traces go through them too), so a re-plan runs no pass; where the
// passes treat the sizes differently, to the traced graph, and a re-plan
// runs them. A mark stays with its input position for later calls of the
// same compiled function.
//
// What cannot be dynamic says so once on stderr and compiles each size on
// its own: a number that is not affine in the size (1/size), a probe size
// the function rejects, a global input. A re-plan whose inferred shapes
// disagree with the template traces again. Host code that computes a number
// or branches on a dynamic size the same way at the traced sizes but another
// way at a new size (a min or max whose kink lies outside them) is not
// seen: keep such code outside the compiled function, or leave the dim
// static.

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "tessera/core/tensor.h"
#include "tessera/graph/ir.h"
#include "tessera/graph/trace.h"

namespace tessera::graph {

// Marks dim `dim` (negative counts from the end) of `x` dynamic for
// graph::compile and returns x.
Tensor dynamic(const Tensor& x, int64_t dim);
// The dims of `x` marked dynamic, in increasing order.
std::vector<int64_t> dynamic_dims(const Tensor& x);

// One dynamic size of a traced function: the input dims (input, dim) that
// have it, and its value at the trace.
struct DynamicSize {
  std::vector<std::pair<size_t, int64_t>> dims;
  int64_t traced = 0;
};
// The dynamic sizes of `marks` (per input, its marked dims) for inputs of
// `signature`: marked dims of equal size share one; with `by_dim_too`, only
// those that are also the same dim (x's and y's dim 0, the batch, apart
// from their dim 1, the sequence, when the two happen to be equal).
std::vector<DynamicSize> group_sizes(const MetaVector& signature,
                                     const std::vector<std::vector<int64_t>>& marks,
                                     bool by_dim_too = false);

// `fn` traced at sizes beside the traced ones (`signature`'s), to learn
// how its graph follows them: above them, or, where the function rejects
// those (a sequence longer than a model's context), below. Raises an error
// with both failures when neither works.
struct ProbeTraces {
  std::vector<std::vector<int64_t>> points;  // a size per DynamicSize
  std::vector<Graph> graphs;                 // the trace at each point
};
ProbeTraces trace_probes(const TracedFn& fn, const MetaVector& signature,
                         const std::vector<DynamicSize>& sizes);

// A traced graph and how its numbers follow the dynamic sizes.
class ShapeTemplate {
 public:
  // Fits every number of `traced` (the trace at `signature`) to its
  // `probes` (trace_probes at `sizes`). Raises an error saying what does
  // not follow the sizes.
  // With `transform`, `traced` is the trace after it, and every probe trace
  // goes through it too (graph::compile passes the passes, so a re-plan
  // resizes the optimised graph and runs no pass).
  ShapeTemplate(const MetaVector& signature, Graph traced, std::vector<DynamicSize> sizes,
                const ProbeTraces& probes,
                const std::function<Graph(const Graph&)>& transform = nullptr);

  // The sizes of a call with `signature`, or nothing when the call differs
  // from the trace in more than the dynamic dims.
  std::optional<std::vector<int64_t>> sizes_of(const MetaVector& signature) const;
  // The graph at `sizes`, its shapes inferred node by node. Raises when a
  // number is not whole there or an inferred shape disagrees.
  Graph instantiate(const std::vector<int64_t>& sizes) const;

  const Graph& traced() const { return traced_; }
  const std::vector<DynamicSize>& sizes() const { return sizes_; }
  // "input 0 dim 0 = 32, input 1 dim 0 = 32" at `sizes`.
  std::string describe(const std::vector<int64_t>& sizes) const;

 private:
  // A number of the graph as a function of sizes s0 (and s1):
  // c + a0 (s0 - t0) + a1 (s1 - t1) + a01 (s0 - t0) (s1 - t1), t the traced sizes.
  struct Fit {
    double c = 0, a0 = 0, a1 = 0, a01 = 0;
    bool varies = false;  // false: the traced number is kept as it is
  };
  double evaluate(const Fit& fit, const std::vector<int64_t>& sizes) const;
  std::vector<int64_t> at_trace_sizes() const;

  MetaVector signature_;
  Graph traced_;
  std::vector<DynamicSize> sizes_;
  std::vector<Fit> fits_;  // in the order numbers_of() lists them
  // Per node: a random op's counters are its output's size over this
  // (0: its count is fitted like any number).
  std::vector<int64_t> random_per_;
};

}  // namespace tessera::graph
