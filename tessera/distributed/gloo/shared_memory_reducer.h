#pragma once

// All-reduce through one shared-memory segment, for a Gloo group whose ranks
// all run on one machine. Gloo moves data only over TCP: on one machine each
// byte crosses the loopback stack on both sides and wakes Gloo's polling
// thread, and in a two-rank data-parallel step that cost more CPU than the
// gradients' compute (bench/dp_compare.py). MPI's shared-memory transport
// needs ranks started by mpirun, so the ranks tessera-run starts reduce here.
//
// The algorithm, per chunk of at most slot_bytes: every rank copies its part
// into its own slot; after a barrier, rank r reduces slice r of the chunk
// over all slots (in rank order, so every rank ends with the same bits) into
// a shared result; after a second barrier every rank copies the result out.
// Two sets of slots alternate, so a chunk never waits for the previous one's
// readers. Barriers are per-rank epoch counters woken through futexes.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>

#include "tessera/core/dtype.h"
#include "tessera/distributed/collective_checks.h"
#include "tessera/distributed/group.h"

namespace tessera::distributed {

class SharedMemoryReducer {
 public:
  // Rank 0 creates the segment `name` (create = true); the others open it
  // after that. `where` ("rank r of n") starts messages. Throws
  // tessera::Error when the segment cannot be made or mapped.
  SharedMemoryReducer(std::string name, bool create, int rank, int size,
                      std::chrono::milliseconds timeout, std::string where);
  ~SharedMemoryReducer();
  SharedMemoryReducer(const SharedMemoryReducer&) = delete;
  SharedMemoryReducer& operator=(const SharedMemoryReducer&) = delete;

  // Removes the segment's name once every rank has it mapped, so nothing is
  // left behind even if a rank dies later; the mappings stay valid.
  void unlink();
  // Reduces the tensor data at `data` (laid out as `layout`) in place across
  // the ranks. Ranks whose layouts or ops differ all raise, naming both, and
  // the reducer stays usable. A rank that dies or does not arrive within the
  // timeout raises naming that rank; the reducer is unusable after that.
  void all_reduce(void* data, const Layout& layout, ReduceOp op);

  // A segment name no other live process uses ("/tessera-<pid>-<n>").
  static std::string fresh_name();
  // Bytes of one rank's slot: the largest chunk reduced in one round.
  static constexpr size_t kSlotBytes = size_t{2} << 20;

 private:
  // Marks this rank's arrival at the next barrier and waits for the others.
  void barrier();
  // Waits until rank `peer`'s epoch reaches `target`.
  void wait_for(int peer, uint32_t target);
  // Throws unless every rank posted the same layout and op.
  void check_agreement(const Layout& mine, ReduceOp op);
  // Each rank's control block: barrier epoch, process id, and its call.
  uint8_t* control(int rank) const;
  uint32_t* epoch_word(int rank) const;
  int32_t* pid_word(int rank) const;
  uint32_t* op_word(int rank) const;
  int64_t* layout_words(int rank) const;

  std::string name_;
  bool owner_;
  int rank_;
  int size_;
  std::chrono::milliseconds timeout_;
  std::string where_;
  size_t bytes_ = 0;
  uint8_t* base_ = nullptr;
  uint8_t* data_ = nullptr;
  uint32_t epoch_ = 0;
  uint64_t rounds_ = 0;
  bool broken_ = false;
};

}  // namespace tessera::distributed
