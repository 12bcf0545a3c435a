#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "tessera/distributed/group.h"

namespace tessera::distributed {

// The MPI backend (OpenMPI) for ranks started by mpirun: data moves through
// MPI's transports, shared memory between the ranks of one machine. Every
// collective runs non-blocking underneath and waits at most `timeout`. MPI
// cannot cancel a started collective, so after a timeout every later call
// throws and the process should exit (it then skips MPI_Finalize, which
// would wait for the lost peer). mpi.h stays out of this header: MPI is
// linked PRIVATE and only exists when Tessera is built with TESSERA_WITH_MPI.
class MpiGroup : public Group {
 public:
  // All ranks mpirun started (MPI_COMM_WORLD). Initialises MPI on the first
  // call (MPI_THREAD_SERIALIZED) and finalizes it at exit.
  static std::shared_ptr<MpiGroup> world(std::chrono::milliseconds timeout);
  ~MpiGroup() override;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  void all_reduce(Tensor& tensor, ReduceOp op = ReduceOp::sum) override;
  std::vector<Tensor> all_gather(const Tensor& tensor) override;
  std::vector<Tensor> all_gather_uneven(const Tensor& tensor) override;
  Tensor reduce_scatter(const std::vector<Tensor>& inputs, ReduceOp op = ReduceOp::sum) override;
  std::vector<Tensor> all_to_all(const std::vector<Tensor>& inputs) override;
  void broadcast(Tensor& tensor, int root) override;
  // Tags must be below MPI's tag limit less two (at least 32765); the top
  // three tags carry split's check-in, the collectives' own messages and a
  // rank's announcement that its program ended.
  void send(const Tensor& tensor, int peer, int tag = 0) override;
  void recv(Tensor& tensor, int peer, int tag = 0) override;
  void barrier() override;
  // Members first check in with each other (with the timeout), then build
  // the communicator with MPI_Comm_create_group.
  std::shared_ptr<Group> split(const std::vector<int>& ranks) override;

 private:
  struct Communicator;  // wraps MPI_Comm
  struct Pending;       // requests in flight and the memory they use

  MpiGroup(std::unique_ptr<Communicator> communicator, std::chrono::milliseconds timeout);
  // Polls until every request of `pending` completes; throws naming `op`
  // after the timeout, keeping the memory MPI may still write alive.
  void wait(const char* op, Pending& pending);
  // Throws naming `op` if an earlier timeout left MPI unusable.
  void check_usable(const char* op) const;
  // Gathers `values.size()` int64 from every rank (the same count everywhere).
  std::vector<int64_t> gather_int64(const char* op, const std::vector<int64_t>& values);
  // all_gather and all_gather_uneven: gathers shapes first, then bytes.
  std::vector<Tensor> gather(const char* op, const Tensor& tensor, bool equal_shapes);
  // "rank r of n" for messages.
  std::string where() const;
  // Publishes every rank's process and machine to the others (after the
  // communicator is made), so a peer that leaves can be named.
  void exchange_processes();
  // The peers of this machine whose process has ended, as "rank 2 (process
  // 4242 exited)" joined by ", "; "" when none is known.
  std::string ended_peers() const;
  int split_tag() const { return max_tag_; }
  int data_tag() const { return max_tag_ - 1; }
  int leave_tag() const { return max_tag_ - 2; }

  std::unique_ptr<Communicator> communicator_;
  int rank_ = 0;
  int size_ = 1;
  int max_tag_ = 32767;  // MPI_TAG_UB of this MPI
  std::chrono::milliseconds timeout_;
  // Per rank of this group: its pid and a hash of its machine's identity.
  std::vector<int64_t> peer_pids_;
  std::vector<int64_t> peer_machines_;
  // Per rank of this group: its rank in the world group.
  std::vector<int> world_ranks_;
};

}  // namespace tessera::distributed
