#pragma once

// All-reduce, all-gather, reduce-scatter, all-to-all, broadcast and
// barriers through one shared-memory segment, for a Gloo group whose ranks
// all run on one machine. Gloo moves data only over TCP: on one machine
// each byte crosses the loopback stack on both sides and wakes Gloo's
// polling thread, and in a two-rank data-parallel step that cost more CPU
// than the gradients' compute (bench/dp_compare.py). MPI's shared-memory
// transport needs ranks started by mpirun, so the ranks tessera-run starts
// reduce here.
//
// Every collective moves rounds of at most kSlotBytes per rank. All-reduce:
// every rank copies its part into its own slot; after a barrier, rank r
// reduces slice r of the chunk over all slots (in rank order, so every rank
// ends with the same bits) into a shared result; after a second barrier
// every rank copies the result out. All-gather: every rank copies the next
// chunk of its piece into its slot and, after a barrier, copies every
// peer's out; the pieces' sizes travel with the first round's layouts, so
// uneven pieces need no extra round trip. Reduce-scatter: every rank copies
// the next chunk of each peer's piece into its slot and, after a barrier,
// reduces its own. All-to-all: every rank's slot holds one part per peer,
// each carrying the next chunk of what it sends that peer; after a barrier
// every rank copies its part out of each peer's slot; the first round's
// slots begin with the row counts sent to each peer. Broadcast: the root
// copies the next chunk into its slot and, after a barrier, every other rank
// copies it out. Two sets of slots alternate, so a round never waits for
// the previous one's readers: a set is written again only after a barrier
// every reader of its last round has passed. Barriers are per-rank epoch
// counters woken through futexes.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "tessera/core/dtype.h"
#include "tessera/core/tensor.h"
#include "tessera/distributed/collective_checks.h"
#include "tessera/distributed/group.h"

namespace tessera::distributed {

class SharedMemoryCollectives {
 public:
  // Rank 0 creates the segment `name` (create = true); the others open it
  // after that. `where` ("rank r of n") starts messages. Throws
  // tessera::Error when the segment cannot be made or mapped.
  SharedMemoryCollectives(std::string name, bool create, int rank, int size,
                          std::chrono::milliseconds timeout, std::string where);
  ~SharedMemoryCollectives();
  SharedMemoryCollectives(const SharedMemoryCollectives&) = delete;
  SharedMemoryCollectives& operator=(const SharedMemoryCollectives&) = delete;

  // Removes the segment's name once every rank has it mapped, so nothing is
  // left behind even if a rank dies later; the mappings stay valid.
  void unlink();
  // Reduces the tensor data at `data` (laid out as `layout`) in place across
  // the ranks. Ranks whose layouts or ops differ all raise, naming both, and
  // the segment stays usable; so do ranks calling different collectives. A
  // rank that dies or does not arrive within the timeout raises naming that
  // rank; the segment is unusable after that.
  void all_reduce(void* data, const Layout& layout, ReduceOp op);
  // Every rank's `tensor` (contiguous, on the CPU), gathered along dim 0
  // into one tensor, and each rank's rows as views of it. Unless
  // `equal_shapes`, dim 0 may differ between ranks. `op` names the call in
  // messages; `hint` ends a mismatch's message (what would be valid).
  std::vector<Tensor> all_gather(const char* op, const Tensor& tensor, bool equal_shapes,
                                 const std::string& hint);
  // Every rank's flat `piece` (contiguous, on the CPU), gathered into `out`
  // (contiguous) along `dim`: rank q's piece is out's shape with sizes[q]
  // along `dim`, and each chunk is written straight into its block.
  void all_gather_into(const Tensor& piece, const Tensor& out, int64_t dim,
                       const std::vector<int64_t>& sizes);
  // Sum (or `reduce`) over ranks of each rank's inputs[rank()], the inputs
  // one per rank, contiguous, of one dtype and shape.
  Tensor reduce_scatter(const std::vector<Tensor>& inputs, ReduceOp reduce,
                        const std::string& hint);
  // inputs[peer] (contiguous, on the CPU, of one dtype and shape but for
  // dim 0) goes to rank `peer`; returns what each rank sent this one, in
  // rank order, as views of one tensor.
  std::vector<Tensor> all_to_all(const std::vector<Tensor>& inputs, const std::string& hint);
  // Copies root's tensor data at `data` (laid out as `layout`) into every
  // other rank's. Ranks whose layouts or roots differ all raise.
  void broadcast(void* data, const Layout& layout, int root);
  // Returns once every rank has called it (one round barrier, no data).
  void barrier();

  // A segment name no other live process uses ("/tessera-<pid>-<n>").
  static std::string fresh_name();
  // Bytes of one rank's slot: the largest chunk reduced in one round.
  static constexpr size_t kSlotBytes = size_t{2} << 20;

 private:
  // Which collective a rank is in, posted beside its layout.
  enum class Call : uint32_t {
    all_reduce = 1,
    all_gather,
    all_gather_uneven,
    reduce_scatter,
    all_to_all,
    barrier,
    broadcast
  };
  // Takes bytes [offset, offset + bytes) of rank `peer`'s piece from `from`.
  using PutBytes = std::function<void(int peer, size_t offset, const uint8_t* from, size_t bytes)>;
  // An all-gather's rounds: `place` gets every rank's row count once the
  // first round has shown them, and `put` every chunk of every piece.
  void gather_rounds(const char* op, const Tensor& tensor, bool equal_shapes,
                     const std::string& hint,
                     const std::function<void(const std::vector<int64_t>&)>& place,
                     const PutBytes& put);
  // Posts this rank's call: what the peers check at the first barrier.
  // `argument` is the reduce op, or a broadcast's root.
  void post(Call call, const Layout& layout, uint32_t argument);
  // Marks this rank's arrival at the next round barrier and waits for the others.
  void arrive_and_wait();
  // Waits until rank `peer`'s epoch reaches `target`.
  void wait_for(int peer, uint32_t target);
  // Throws unless every rank posted the same call and argument and a layout
  // compatible with `mine` (equal, or equal but for dim 0 unless
  // `equal_shapes`).
  void check_agreement(Call call, const Layout& mine, uint32_t argument, bool equal_shapes,
                       const std::string& hint);
  // The set of slots the next round uses (alternating), and rank r's slot in it.
  uint8_t* next_set();
  uint8_t* slot(uint8_t* set, int rank) const;
  // Each rank's control block: barrier epoch and process id, then two
  // records of its call (which collective, reduce op, layout). A call posts
  // to the record of its first round's parity, so a rank that runs ahead
  // into its next call never overwrites a record a slower peer still reads.
  uint8_t* control(int rank) const;
  uint32_t* epoch_word(int rank) const;
  int32_t* pid_word(int rank) const;
  uint8_t* record(int rank) const;  // this call's
  uint32_t* call_word(int rank) const;
  uint32_t* op_word(int rank) const;
  int64_t* layout_words(int rank) const;

  std::string name_;
  bool owner_;
  int rank_;
  int size_;
  std::chrono::milliseconds timeout_;
  std::string where_;
  const char* op_ = "all_reduce";  // the call in progress, for messages
  size_t bytes_ = 0;
  uint8_t* base_ = nullptr;
  uint8_t* data_ = nullptr;
  uint32_t epoch_ = 0;
  uint64_t rounds_ = 0;
  uint64_t call_round_ = 0;  // the first round of the call in progress
  bool broken_ = false;
};

}  // namespace tessera::distributed
