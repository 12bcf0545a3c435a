#pragma once

// The collectives as ops on local tensors, with gradients: every rank of
// `ranks` (ranks of the default group, in this order; empty means all of
// them) calls the same op with the same arguments (SPMD). Boxing runs its
// steps through these, so a tracer sees each data movement as a node.
//
// Gradients follow torch.distributed.nn.functional: the loss is the sum of
// every rank's own loss, so each op's gradient is the collective that
// moves the gradients back:
//
//   all_reduce (sum)   <->  all_reduce (sum)
//   all_gather         <->  reduce_scatter (sum)
//   reduce_scatter     <->  all_gather
//   all_to_all         <->  all_to_all, dims swapped
//   all_to_all_single  <->  all_to_all_single, split sizes swapped
//   broadcast          <->  the sum of the gradients on the root, zeros elsewhere
//
// max and min reductions have no gradient.

#include <cstdint>
#include <vector>

#include "tessera/core/tensor.h"
#include "tessera/distributed/group.h"

namespace tessera::global {

// Every rank gets the elementwise reduction of every rank's x.
Tensor all_reduce(const Tensor& x, distributed::ReduceOp op = distributed::ReduceOp::sum,
                  const std::vector<int>& ranks = {});

// all_reduce in place, as torch.distributed.all_reduce: x (contiguous) holds
// the reduction afterwards. Not recorded by autograd: under grad mode, x
// must not require grad.
void all_reduce_(const Tensor& x, distributed::ReduceOp op = distributed::ReduceOp::sum,
                 const std::vector<int>& ranks = {});

// Every rank's x concatenated along `dim`, in rank order. The ranks may
// differ in the size of `dim`; `sizes` (one per rank) gives them when they
// do (without it, all are taken to be this rank's size, and checked).
Tensor all_gather(const Tensor& x, int64_t dim = 0, const std::vector<int>& ranks = {},
                  const std::vector<int64_t>& sizes = {});

// x reduced across ranks, and this rank's piece of the result along `dim`:
// pieces of `sizes` (one per rank) when given, else split_range's (the
// first ranks get the extra elements).
Tensor reduce_scatter(const Tensor& x, int64_t dim = 0,
                      distributed::ReduceOp op = distributed::ReduceOp::sum,
                      const std::vector<int>& ranks = {}, const std::vector<int64_t>& sizes = {});

// x split along `split_dim` into one piece per rank (of `split_sizes`, else
// split_range's); rank q gets piece q of every rank, concatenated along
// `concat_dim` in rank order. `concat_sizes` gives each rank's size of
// concat_dim when they differ (without it, all are this rank's).
Tensor all_to_all(const Tensor& x, int64_t split_dim, int64_t concat_dim,
                  const std::vector<int>& ranks = {}, const std::vector<int64_t>& split_sizes = {},
                  const std::vector<int64_t>& concat_sizes = {});

// Rows of dim 0 to each rank and from each rank, as
// torch.distributed.nn.functional.all_to_all_single: x's first
// input_split_sizes[q] rows (in order) go to rank q, and the result is the
// rows every rank sent here, output_split_sizes[q] from rank q, in rank
// order. Both lists have one entry per rank and may hold zeros.
Tensor all_to_all_single(const Tensor& x, const std::vector<int64_t>& output_split_sizes,
                         const std::vector<int64_t>& input_split_sizes,
                         const std::vector<int>& ranks = {});

// The root's x (root: an index into `ranks`) on every rank.
Tensor broadcast(const Tensor& x, int root = 0, const std::vector<int>& ranks = {});

}  // namespace tessera::global
