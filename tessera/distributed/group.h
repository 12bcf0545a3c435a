#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "tessera/core/tensor.h"
#include "tessera/core/work.h"
#include "tessera/distributed/backend.h"
#include "tessera/distributed/environment.h"

namespace tessera::distributed {

// How all_reduce and reduce_scatter combine the ranks' values.
enum class ReduceOp { sum, max, min };

// "sum", "max", "min".
const char* reduce_op_name(ReduceOp op);

// Writes flat `parts` (one per rank, as they travelled) into their blocks
// of `out` along `dim`, block q sizes[q] long: in contiguous runs, nothing
// transposed. Group::all_gather_into's copy, and an all-to-all's. `op`
// names the call in messages.
void write_blocks(const char* op, const Tensor& out, int64_t dim, const std::vector<int64_t>& sizes,
                  const std::vector<Tensor>& parts);

// A set of processes that run collectives together; one object per process.
// Every rank of the group must call each collective in the same order. All
// tensors are contiguous CPU tensors, or with NCCL also on the group's CUDA
// device (reductions: f32, f64, i64, i32; data movement also u8). A
// collective that cannot finish within the group's timeout, or loses a
// peer, throws tessera::Error naming the op.
class Group {
 public:
  Group();
  virtual ~Group();
  Group(const Group&) = delete;
  Group& operator=(const Group&) = delete;

  // This process's index in [0, size()).
  virtual int rank() const = 0;
  // Number of processes in the group.
  virtual int size() const = 0;

  // Combines `tensor` elementwise across ranks, in place; every rank gets the result.
  virtual void all_reduce(Tensor& tensor, ReduceOp op = ReduceOp::sum) = 0;
  // Every rank's `tensor` (same shape and dtype everywhere), indexed by rank.
  virtual std::vector<Tensor> all_gather(const Tensor& tensor) = 0;
  // Like all_gather, but ranks may differ in dim 0 (trailing dims and dtype must agree).
  virtual std::vector<Tensor> all_gather_uneven(const Tensor& tensor) = 0;
  // Every rank's `piece` gathered into `out` along `dim`: rank q's block
  // there is sizes[q] long and out's other dims are the pieces'. `out` is
  // written in place (contiguous, or any view). The default gathers the
  // pieces flat and copies each block in; a backend may write the blocks
  // straight from what it receives, without holding the result twice.
  virtual void all_gather_into(const Tensor& piece, const Tensor& out, int64_t dim,
                               const std::vector<int64_t>& sizes);
  // inputs[j] (one per rank, same shape) is reduced across ranks into rank j's result.
  virtual Tensor reduce_scatter(const std::vector<Tensor>& inputs, ReduceOp op = ReduceOp::sum) = 0;
  // Sends inputs[j] to rank j; result[i] is what rank i sent here. Dim 0 may differ.
  virtual std::vector<Tensor> all_to_all(const std::vector<Tensor>& inputs) = 0;
  // Overwrites `tensor` on every rank with root's (same shape and dtype everywhere).
  virtual void broadcast(Tensor& tensor, int root) = 0;
  // Sends `tensor` to `peer`; matched by a recv with the same tag. Blocks until sent.
  virtual void send(const Tensor& tensor, int peer, int tag = 0) = 0;
  // Receives into `tensor` (its size must match the sender's) from `peer`.
  virtual void recv(Tensor& tensor, int peer, int tag = 0) = 0;
  // Returns once every rank has entered the barrier.
  virtual void barrier() = 0;
  // A new group of `ranks` (indices in this group; the new rank is the
  // position in the list). Only those ranks call it, with the same list.
  virtual std::shared_ptr<Group> split(const std::vector<int>& ranks) = 0;
  // Whether collectives of two different groups may run at once on two
  // threads (Gloo: yes; MPI: one thread in MPI at a time).
  virtual bool concurrent_groups() const { return false; }

  // Runs `collective` (calls of this group's methods, and host work on
  // their results) after every collective launched here before it. With
  // `async`, where the backend lets collectives run on another thread
  // (concurrent_groups()), it goes to this group's communication thread and
  // launch returns at once: the caller computes while it runs. Otherwise it
  // runs now, on the caller's thread. wait() on the returned Work rethrows
  // what it threw. While launched work is in flight, reach this group only
  // through launch (the collective ops do). `on_queued` gets the Work of
  // an asynchronous launch before the collective can start.
  std::shared_ptr<Work> launch(
      std::function<void()> collective, bool async,
      const std::function<void(const std::shared_ptr<Work>&)>& on_queued = {});
  // Blocks until every collective launched here has finished.
  void wait_launched();

 private:
  struct Launcher;
  std::unique_ptr<Launcher> launcher_;  // made by the first asynchronous launch
};

// What this process has handed to collectives since reset_traffic(): the
// calls and their payload bytes (all-reduce and broadcast: the tensor;
// all-gather: its own piece; reduce-scatter and all-to-all: all its
// pieces). The Gloo, MPI and NCCL backends count each collective as it starts,
// so tests compare what moved with what a boxing plan priced.
struct Traffic {
  int64_t calls = 0;
  int64_t payload_bytes = 0;
};
Traffic traffic();
void reset_traffic();
// For backends: counts one collective of these payloads.
void count_traffic(const Tensor& payload);
void count_traffic(const std::vector<Tensor>& payload);

// Joins the job the process environment describes, with backend_from_env(),
// and makes it the default group (as do the overloads below). Gloo reads
// Environment::from_env(); MPI needs only TESSERA_TIMEOUT_S.
std::shared_ptr<Group> init_process_group();
// Joins the job `env` describes with backend_from_env().
std::shared_ptr<Group> init_process_group(const Environment& env);
// Joins with `backend`. gloo: the ranks and the store `env` names. mpi: the
// ranks mpirun started (only env.timeout is used); throws if the MPI backend
// is not built in or mpirun did not start this process. nccl: like gloo, on
// cuda:(env.local_rank mod device count); throws if it is not built in or
// no CUDA device is visible.
std::shared_ptr<Group> init_process_group(const Environment& env, Backend backend);

// The group global tensors run on: the last one init_process_group made, or
// a one-process group when it was never called (so global code runs as is
// in a plain single process).
std::shared_ptr<Group> default_group();
// Replaces the default group (null restores the one-process default).
void set_default_group(std::shared_ptr<Group> group);

}  // namespace tessera::distributed
