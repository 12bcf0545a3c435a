#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "tessera/distributed/group.h"
#include "tessera/distributed/store.h"

namespace tessera::distributed {

// The NCCL backend: collectives between CUDA devices, one process per GPU.
// Rank 0 creates the NCCL id and publishes it through the Store (the one
// the Gloo backend rendezvouses on); every rank then joins on its device.
//
// Tensors on the group's device are used in place. CPU tensors are staged
// through device buffers (copied in, collective, copied out): a convenience
// for code written for the CPU backends, not a fast path. Tensors on another
// CUDA device raise.
//
// Every call runs on the group's own CUDA stream and returns when its work
// is complete. The communicator is non-blocking: a call polls the stream
// and NCCL's error state until the timeout, then aborts the communicator
// and throws tessera::Error naming the op; the group is unusable afterwards.
// Before moving data, every collective exchanges the ranks' layouts (one
// small all_gather), so a dtype or shape that differs between ranks raises
// on every rank instead of reaching NCCL. send/recv exchange (dtype, numel,
// tag) both ways first; NCCL matches messages between two ranks in order,
// so tags must come in the same order on both sides. nccl.h and
// cuda_runtime.h stay out of this header (both are linked PRIVATE).
class NcclGroup : public Group {
 public:
  // Joins `size` ranks on cuda:`device`, rendezvousing under `prefix` in
  // `store`; waits at most `timeout` there and in every collective. With
  // the job's key prefix and each member's rank in the job, a peer whose
  // process ended (on this machine) is named, at once rather than at the
  // timeout.
  NcclGroup(std::shared_ptr<Store> store, std::string prefix, int rank, int size, int device,
            std::chrono::milliseconds timeout, std::string job_prefix = "",
            std::vector<int> job_ranks = {});
  ~NcclGroup() override;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  // The CUDA device index this group runs on.
  int device() const { return device_; }
  void all_reduce(Tensor& tensor, ReduceOp op = ReduceOp::sum) override;
  std::vector<Tensor> all_gather(const Tensor& tensor) override;
  std::vector<Tensor> all_gather_uneven(const Tensor& tensor) override;
  Tensor reduce_scatter(const std::vector<Tensor>& inputs, ReduceOp op = ReduceOp::sum) override;
  std::vector<Tensor> all_to_all(const std::vector<Tensor>& inputs) override;
  void broadcast(Tensor& tensor, int root) override;
  void send(const Tensor& tensor, int peer, int tag = 0) override;
  void recv(Tensor& tensor, int peer, int tag = 0) override;
  void barrier() override;
  // A new communicator for the members, through a fresh NCCL id under a key
  // unique to the list and how often it was split (ncclCommSplit would need
  // every rank of this group to call it).
  std::shared_ptr<Group> split(const std::vector<int>& ranks) override;

 private:
  struct Handles;  // ncclComm_t and cudaStream_t

  // Throws naming `op` if a timeout or NCCL error left the group unusable.
  void check_usable(const char* op) const;
  // Waits for NCCL calls that returned ncclInProgress, then for the stream;
  // throws after the timeout (aborting the communicator) or on an error.
  void wait(const char* op);
  // Runs NCCL calls (`launch` returns the ncclResult_t of the last one) and waits for them.
  template <typename Fn>
  void run(const char* op, Fn&& launch);
  // Aborts the communicator and throws "[op] rank r of n <what>".
  [[noreturn]] void fail(const char* op, const std::string& what);
  // The tensor's data on the group's device: itself when it is there, else
  // a copy (CPU tensors); raises for another CUDA device.
  Tensor on_device(const Tensor& tensor) const;
  // Every rank's `values` (the same count everywhere), through the device.
  std::vector<int64_t> gather_int64(const char* op, const std::vector<int64_t>& values);
  // Exchanges layouts and raises unless every rank's matches this one's.
  void check_peers(const char* op, const Tensor& tensor, const std::string& hint = "");
  // all_gather and all_gather_uneven.
  std::vector<Tensor> gather(const char* op, const Tensor& tensor, bool equal_shapes);
  // send (sending) or recv: headers both ways, then the data.
  void point_to_point(const char* op, const Tensor& tensor, int peer, int tag, bool sending);
  // "rank r of n" for messages.
  std::string where() const;
  // Members whose process has ended, as "rank 2 (process 4242 exited)"; "".
  std::string ended_peers() const;

  std::shared_ptr<Store> store_;
  std::string prefix_;
  int rank_;
  int size_;
  int device_;
  std::chrono::milliseconds timeout_;
  std::unique_ptr<Handles> handles_;
  std::string broken_;                            // why the group is unusable; empty while it works
  std::map<std::vector<int>, int> split_counts_;  // same list, same count on every member
  std::string job_prefix_;
  std::vector<int> job_ranks_;  // per member: its rank in the job (empty: not known)
};

}  // namespace tessera::distributed
