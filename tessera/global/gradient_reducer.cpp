// Gradients of global parameters reach their layout here. For a broadcast
// parameter fed split data, backward hands over a partial sum that must be
// all-reduced. Two ways:
//
// - By default (as DDP's buckets): each such gradient waits in a bucket with
//   others of the same placement, dtype and reduced mesh axes; a bucket is
//   reduced by one all-reduce of its concatenated shards when it reaches
//   kGradientBucketBytes (gradient_buckets.h) and when backward ends. One collective per bucket
//   instead of one per parameter: fewer round trips and fewer points where every rank waits for the
//   slowest. Other conversions are boxed at once.
// - With TESSERA_OVERLAP_GRADIENTS=1, each gradient is reduced on a
//   communication thread while backward computes earlier layers. Every rank
//   hands gradients over in the same order (the engine's order is fixed by
//   the graph), and the thread reduces them in that order on groups of its
//   own, so its collectives never interleave with the main thread's. With
//   the MPI backend (one thread in MPI at a time) and in one process, the
//   buckets are used instead. Off by default: on the 2-core machine the
//   benchmarks run on, two ranks already use every core and the extra thread
//   made the data-parallel step slower (bench/dp_bench).

#include <cstdlib>
#include <exception>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "tessera/autograd/engine.h"
#include "tessera/core/grad_mode.h"
#include "tessera/core/work_queue.h"
#include "tessera/distributed/group.h"
#include "tessera/global/boxing.h"
#include "tessera/global/collective_ops.h"
#include "tessera/global/gradient_buckets.h"
#include "tessera/global/process_groups.h"
#include "tessera/ops/concat.h"
#include "tessera/ops/dispatch.h"
#include "tessera/ops/elementwise.h"
#include "tessera/ops/op.h"

namespace tessera {

namespace {

// The communication thread: a WorkQueue whose failures wait() reports.
class GradientReducer {
 public:
  void submit(std::function<void()> task) { works_.push_back(queue_.submit(std::move(task))); }

  // Blocks until everything submitted has run; rethrows the first failure.
  void wait() {
    std::vector<std::shared_ptr<Work>> works = std::move(works_);
    works_.clear();
    std::exception_ptr first;
    for (const std::shared_ptr<Work>& work : works) {
      try {
        work->wait();
      } catch (...) {
        if (!first) first = std::current_exception();
      }
    }
    if (first) std::rethrow_exception(first);
  }

 private:
  WorkQueue queue_{[] {
    global::use_gradient_groups(true);
    set_grad_enabled(false);
  }};
  std::vector<std::shared_ptr<Work>> works_;
};

// Made on first use and never destroyed: the thread waits for work until
// the process exits.
GradientReducer& reducer() {
  static auto* instance = new GradientReducer();
  return *instance;
}

bool overlap_enabled() {
  static const bool enabled = [] {
    const char* value = std::getenv("TESSERA_OVERLAP_GRADIENTS");
    return value != nullptr && std::string(value) == "1";
  }();
  return enabled;
}

// Whether gradients are reduced on the communication thread. Never under a
// mode handler: a tracer must see the reductions on its own thread, where
// they become nodes of its graph in the order backward issued them.
bool overlap_thread(const distributed::Group& world) {
  return overlap_enabled() && world.concurrent_groups() && !mode_active();
}

// Adds `value` to the leaf's gradient (or makes it the gradient).
void accumulate_into(TensorImpl& leaf, const Tensor& value) {
  leaf.grad = leaf.grad ? add(Tensor(leaf.grad), value).impl_ptr() : value.impl_ptr();
}

// Gradients that share a placement, dtype and the mesh axes their partial
// sums are reduced over: one all-reduce serves them all.
struct Bucket {
  Placement placement;
  DType dtype;
  std::vector<int> axes;
  std::vector<std::shared_ptr<TensorImpl>> leaves;
  std::vector<Tensor> shards;  // this rank's part of each partial gradient
  size_t bytes = 0;
};

// Buckets of the backward pass running on this thread, in the order they
// were opened (the same on every rank), and how many it has flushed.
thread_local std::vector<Bucket> open_buckets;
thread_local int flushed_buckets = 0;

// The mesh axes whose partial sums must be all-reduced to turn `gradient`'s
// layout into the leaf's; nullopt when the conversion is anything else
// (those are boxed at once).
std::optional<std::vector<int>> summed_axes(const NdSbp& from, const NdSbp& to) {
  std::vector<int> axes;
  for (int axis = 0; axis < from.ndim(); ++axis) {
    if (from[axis] == to[axis]) continue;
    if (from[axis].kind != SbpKind::partial_sum || !to[axis].is_broadcast()) return std::nullopt;
    axes.push_back(axis);
  }
  return axes;
}

// One all-reduce per reduced axis over the bucket's concatenated shards, then
// each leaf gets its slice, wrapped in the leaf's layout.
void reduce_bucket(Bucket& bucket) {
  const int index = bucket.placement.index_of(global::world_rank());
  std::vector<Tensor> flat;
  flat.reserve(bucket.shards.size());
  for (const Tensor& shard : bucket.shards) flat.push_back(shard.reshape({shard.numel()}));
  Tensor joined = flat.size() == 1 ? flat[0].contiguous().clone() : cat(flat, 0);
  for (int axis : bucket.axes) {
    global::all_reduce_(joined, distributed::ReduceOp::sum,
                        global::axis_ranks(bucket.placement, index, axis));
  }
  int64_t offset = 0;
  for (size_t i = 0; i < bucket.leaves.size(); ++i) {
    TensorImpl& leaf = *bucket.leaves[i];
    const Tensor& shard = bucket.shards[i];
    Tensor piece = joined.narrow(0, offset, shard.numel()).reshape(shard.shape());
    offset += shard.numel();
    accumulate_into(leaf, make_global(piece, leaf.shape, leaf.dtype, leaf.global->placement,
                                      leaf.global->sbp));
  }
}

// Reduces the bucket's gradients (on the communication thread when
// `threaded`) and leaves it empty for the next ones.
void flush(Bucket& bucket, bool threaded) {
  Bucket full = std::move(bucket);
  bucket = Bucket{full.placement, full.dtype, full.axes, {}, {}, 0};
  ++flushed_buckets;
  if (threaded) {
    reducer().submit([full]() mutable { reduce_bucket(full); });
  } else {
    reduce_bucket(full);
  }
}

// Files a partial gradient for its bucket; false when it does not qualify.
bool add_to_bucket(const std::shared_ptr<TensorImpl>& leaf, const Tensor& gradient,
                   bool threaded) {
  const Placement& placement = leaf->global->placement;
  if (!gradient.is_global() || gradient.placement() != placement ||
      gradient.dtype() != leaf->dtype || !placement.contains(global::world_rank())) {
    return false;
  }
  const std::optional<std::vector<int>> axes = summed_axes(gradient.nd_sbp(), leaf->global->sbp);
  if (!axes || axes->empty()) return false;
  Bucket* bucket = nullptr;
  for (Bucket& open : open_buckets) {
    if (open.placement == placement && open.dtype == gradient.dtype() && open.axes == *axes) {
      bucket = &open;
    }
  }
  if (bucket == nullptr) {
    open_buckets.push_back(Bucket{placement, gradient.dtype(), *axes, {}, {}, 0});
    bucket = &open_buckets.back();
  }
  const Tensor shard = gradient.local_shard();
  bucket->leaves.push_back(leaf);
  bucket->shards.push_back(shard);
  bucket->bytes += static_cast<size_t>(shard.numel()) * dtype_size(shard.dtype());
  // As DDP: a small first bucket starts communication early in backward.
  if (bucket->bytes >=
      (flushed_buckets == 0 ? global::kFirstGradientBucketBytes : global::kGradientBucketBytes)) {
    flush(*bucket, threaded);
  }
  return true;
}

bool accumulate_grad(const std::shared_ptr<TensorImpl>& leaf, const Tensor& gradient) {
  auto world = distributed::default_group();
  if (world->size() == 1 || !gradient.is_global()) return false;
  const bool threaded = overlap_thread(*world);
  const Placement placement = leaf->global->placement;
  const NdSbp sbp = leaf->global->sbp;
  const int index = placement.index_of(global::world_rank());
  if (threaded && index >= 0) {
    // The thread's groups are made here, on the main thread, in the same
    // order on every rank: making them is itself a collective.
    global::use_gradient_groups(true);
    for (int axis = 0; axis < placement.ndim(); ++axis) {
      global::group_of(global::axis_ranks(placement, index, axis));
    }
    global::group_of(placement.ranks());
    global::use_gradient_groups(false);
  }
  if (add_to_bucket(leaf, gradient, threaded)) return true;
  if (!threaded) return false;
  // With the thread on, every gradient of a global leaf goes through it, so
  // no two threads ever add to one leaf's gradient.
  reducer().submit([leaf, gradient, placement, sbp] {
    Tensor value = gradient.placement() == placement && gradient.nd_sbp() == sbp
                       ? gradient
                       : global::box(gradient, placement, sbp);
    accumulate_into(*leaf, value);
  });
  return true;
}

void finish_backward(bool failed) {
  auto world = distributed::default_group();
  const bool threaded = overlap_thread(*world);
  // After a failure the ranks may not agree on what was filed, so nothing is
  // reduced: those gradients are dropped with the error.
  std::vector<Bucket> buckets = std::move(open_buckets);
  open_buckets.clear();
  flushed_buckets = 0;
  if (!failed) {
    NoGradGuard no_grad;
    for (Bucket& bucket : buckets) {
      if (!bucket.leaves.empty()) flush(bucket, threaded);
    }
  }
  flushed_buckets = 0;
  if (threaded) reducer().wait();
}

const bool installed = [] {
  set_global_grad_hooks({&accumulate_grad, &finish_backward});
  return true;
}();

}  // namespace

}  // namespace tessera
