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
//
// Every collective also has an _async form that returns a PendingTensor.
// Where the backend runs collectives on another thread (Gloo), the data
// moves on the group's communication thread while the caller computes; a
// kernel that touches the result waits for it first, as a CUDA stream
// waits for an event. Until wait(), the caller must not write the input.
// Elsewhere (MPI, one process) the collective has finished on return. The
// blocking forms are the _async ones followed by wait().

#include <cstdint>
#include <vector>

#include "tessera/core/tensor.h"
#include "tessera/distributed/group.h"

namespace tessera::global {

// A collective's result that may still be moving (torch's Work handle).
class PendingTensor {
 public:
  explicit PendingTensor(Tensor result);
  // Blocks until the collective has finished, rethrows its error, and
  // returns its result.
  Tensor wait();
  // Whether wait() would return at once.
  bool is_completed() const;

 private:
  Tensor result_;
};

// Every rank gets the elementwise reduction of every rank's x.
Tensor all_reduce(const Tensor& x, distributed::ReduceOp op = distributed::ReduceOp::sum,
                  const std::vector<int>& ranks = {});
PendingTensor all_reduce_async(const Tensor& x,
                               distributed::ReduceOp op = distributed::ReduceOp::sum,
                               const std::vector<int>& ranks = {}, bool async = true);

// all_reduce in place, as torch.distributed.all_reduce: x (contiguous) holds
// the reduction afterwards. Not recorded by autograd: under grad mode, x
// must not require grad.
void all_reduce_(const Tensor& x, distributed::ReduceOp op = distributed::ReduceOp::sum,
                 const std::vector<int>& ranks = {});
// wait() returns x.
PendingTensor all_reduce_async_(const Tensor& x,
                                distributed::ReduceOp op = distributed::ReduceOp::sum,
                                const std::vector<int>& ranks = {}, bool async = true);

// Every rank's x concatenated along `dim`, in rank order. The ranks may
// differ in the size of `dim`; `sizes` (one per rank) gives them when they
// do (without it, all are taken to be this rank's size, and checked).
Tensor all_gather(const Tensor& x, int64_t dim = 0, const std::vector<int>& ranks = {},
                  const std::vector<int64_t>& sizes = {});
PendingTensor all_gather_async(const Tensor& x, int64_t dim = 0, const std::vector<int>& ranks = {},
                               const std::vector<int64_t>& sizes = {}, bool async = true);

// x reduced across ranks, and this rank's piece of the result along `dim`:
// pieces of `sizes` (one per rank) when given, else split_range's (the
// first ranks get the extra elements).
Tensor reduce_scatter(const Tensor& x, int64_t dim = 0,
                      distributed::ReduceOp op = distributed::ReduceOp::sum,
                      const std::vector<int>& ranks = {}, const std::vector<int64_t>& sizes = {});
PendingTensor reduce_scatter_async(const Tensor& x, int64_t dim = 0,
                                   distributed::ReduceOp op = distributed::ReduceOp::sum,
                                   const std::vector<int>& ranks = {},
                                   const std::vector<int64_t>& sizes = {}, bool async = true);

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
PendingTensor all_to_all_single_async(const Tensor& x,
                                      const std::vector<int64_t>& output_split_sizes,
                                      const std::vector<int64_t>& input_split_sizes,
                                      const std::vector<int>& ranks = {}, bool async = true);

// The root's x (root: an index into `ranks`) on every rank.
Tensor broadcast(const Tensor& x, int root = 0, const std::vector<int>& ranks = {});
PendingTensor broadcast_async(const Tensor& x, int root = 0, const std::vector<int>& ranks = {},
                              bool async = true);

// Point to point, as torch.distributed.send/recv: `peer` is an index into
// `ranks`, and a send is matched by the peer's recv with the same tag.
//
// send returns a 0-d zero, a token: its backward receives x's gradient
// from the peer (tag `tag`), so a pipeline stage that sent activations
// calls token.backward() (or adds the token to its loss) once the next
// stage has sent the gradient back. A received tensor is a leaf; the
// receiving stage sends its gradient back with send(y.grad(), peer, tag).
Tensor send(const Tensor& x, int peer, int tag = 0, const std::vector<int>& ranks = {});
PendingTensor send_async(const Tensor& x, int peer, int tag = 0, const std::vector<int>& ranks = {},
                         bool async = true);
// A tensor of `shape` and `dtype` on `device`, as the peer sent it.
Tensor recv(const Shape& shape, DType dtype, int peer, int tag = 0,
            const std::vector<int>& ranks = {}, Device device = {});
PendingTensor recv_async(const Shape& shape, DType dtype, int peer, int tag = 0,
                         const std::vector<int>& ranks = {}, Device device = {}, bool async = true);

}  // namespace tessera::global
