// Gradients of global parameters are reduced on a communication thread, as
// DDP does: when backward hands over a parameter's gradient (a partial sum,
// for a broadcast parameter fed split data), the all-reduce into the
// parameter's layout starts at once while backward computes the gradients
// of earlier layers. Backward returns once every reduction has finished.
//
// Every rank hands gradients over in the same order (the engine's order is
// fixed by the graph), and the thread reduces them in that order on groups
// of its own, so its collectives never interleave with the main thread's.
// With the MPI backend (one thread in MPI at a time) and in one process,
// gradients are reduced on the calling thread instead.
//
// Off unless TESSERA_OVERLAP_GRADIENTS=1: on the 2-core machine the
// benchmarks run on, two ranks already use every core and the extra thread
// made the data-parallel step slower (32 ms against 26 ms, bench/dp_bench).
// It is meant for ranks that have a core to spare for communication.

#include <condition_variable>
#include <cstdlib>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

#include "tessera/core/grad_mode.h"
#include "tessera/distributed/gloo/gloo_group.h"
#include "tessera/global/boxing.h"
#include "tessera/global/process_groups.h"
#include "tessera/ops/elementwise.h"
#include "tessera/ops/op.h"

namespace tessera {

namespace {

class GradientReducer {
 public:
  GradientReducer() : worker_([this] { run(); }) {}

  void submit(std::function<void()> task) {
    std::lock_guard<std::mutex> lock(mutex_);
    queue_.push_back(std::move(task));
    ready_.notify_one();
  }

  // Blocks until the queue is empty and idle; rethrows the first failure.
  void wait() {
    std::unique_lock<std::mutex> lock(mutex_);
    idle_.wait(lock, [this] { return queue_.empty() && !busy_; });
    if (error_) {
      std::exception_ptr error = error_;
      error_ = nullptr;
      std::rethrow_exception(error);
    }
  }

 private:
  void run() {
    global::use_gradient_groups(true);
    NoGradGuard no_grad;
    for (;;) {
      std::function<void()> task;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        ready_.wait(lock, [this] { return !queue_.empty(); });
        task = std::move(queue_.front());
        queue_.pop_front();
        busy_ = true;
      }
      try {
        task();
      } catch (...) {
        std::lock_guard<std::mutex> lock(mutex_);
        if (!error_) error_ = std::current_exception();
      }
      std::lock_guard<std::mutex> lock(mutex_);
      busy_ = false;
      if (queue_.empty()) idle_.notify_all();
    }
  }

  std::mutex mutex_;
  std::condition_variable ready_, idle_;
  std::deque<std::function<void()>> queue_;
  bool busy_ = false;
  std::exception_ptr error_;
  std::thread worker_;
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

}  // namespace

bool global_accumulate_grad(const std::shared_ptr<TensorImpl>& leaf, const Tensor& gradient) {
  auto world = distributed::default_group();
  if (!overlap_enabled() || world->size() == 1 ||
      dynamic_cast<distributed::GlooGroup*>(world.get()) == nullptr || !gradient.is_global()) {
    return false;
  }
  const Placement placement = leaf->global->placement;
  const NdSbp sbp = leaf->global->sbp;
  const int index = placement.index_of(global::world_rank());
  if (index >= 0) {
    // The thread's groups are made here, on the main thread, in the same
    // order on every rank: making them is itself a collective.
    global::use_gradient_groups(true);
    for (int axis = 0; axis < placement.ndim(); ++axis) {
      global::group_of(global::axis_ranks(placement, index, axis));
    }
    global::group_of(placement.ranks());
    global::use_gradient_groups(false);
  }
  reducer().submit([leaf, gradient, placement, sbp] {
    Tensor value = gradient.placement() == placement && gradient.nd_sbp() == sbp
                       ? gradient
                       : global::box(gradient, placement, sbp);
    leaf->grad = leaf->grad ? add(Tensor(leaf->grad), value).impl_ptr() : value.impl_ptr();
  });
  return true;
}

void global_finish_backward() {
  auto world = distributed::default_group();
  if (!overlap_enabled() || world->size() == 1) return;
  reducer().wait();
}

}  // namespace tessera
