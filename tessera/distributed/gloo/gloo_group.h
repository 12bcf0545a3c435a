#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "tessera/distributed/collective_checks.h"
#include "tessera/distributed/group.h"
#include "tessera/distributed/store.h"

// Gloo stays out of Tessera's public include graph (it is linked PRIVATE).
namespace gloo {
class Context;
namespace transport {
class Device;
}
}  // namespace gloo

namespace tessera::distributed {

class LayoutExchange;
class SharedMemoryCollectives;

// The Gloo backend: a full mesh of TCP connections between the ranks,
// rendezvoused through a Store. Every collective waits at most `timeout`.
//
// Peer checks: all_reduce, all_gather, reduce_scatter and broadcast need the
// same dtype and shape on every rank. Each call posts this rank's layout to
// every peer (small messages, no waiting) and tags its data with a hash of
// the layout, so ranks holding different layouts never exchange bytes. The
// first time a rank sees a layout for an op it waits for the peers' layouts
// before moving data and raises at once on a mismatch, naming both; later
// calls with a layout it has checked before skip that wait and compare the
// layouts, already arrived, after the transfer. A rank whose layout is
// cached facing a peer with a new one cannot match its transfer: it fails
// when the peer raises and leaves (or at the timeout), naming the layouts
// when they have arrived. send/recv exchange (dtype, numel) both ways with
// every message, overlapping the transfer.
//
// When every rank of the group runs on one machine, all_reduce, the
// all-gathers, reduce_scatter and all_to_all move their data through
// shared memory instead of TCP, and barrier waits there (see
// SharedMemoryCollectives); TESSERA_SHARED_MEMORY=0 keeps them on TCP.
class GlooGroup : public Group {
 public:
  // Publishes this rank's address under `prefix` in `store`, waits for the
  // others' and connects to them, all within `connect_timeout` (`timeout`
  // when zero); `hostname` is the address peers dial ("127.0.0.1" when all
  // ranks share a machine). `job_prefix` is where the ranks' records are
  // (see join_rendezvous), used to name a rank whose process has ended.
  GlooGroup(std::shared_ptr<Store> store, std::string prefix, int rank, int size,
            std::chrono::milliseconds timeout, std::string hostname = "127.0.0.1",
            std::string job_prefix = "",
            std::chrono::milliseconds connect_timeout = std::chrono::milliseconds(0));
  ~GlooGroup() override;
  bool concurrent_groups() const override { return true; }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  void all_reduce(Tensor& tensor, ReduceOp op = ReduceOp::sum) override;
  std::vector<Tensor> all_gather(const Tensor& tensor) override;
  std::vector<Tensor> all_gather_uneven(const Tensor& tensor) override;
  void all_gather_into(const Tensor& piece, const Tensor& out, int64_t dim,
                       const std::vector<int64_t>& sizes) override;
  Tensor reduce_scatter(const std::vector<Tensor>& inputs, ReduceOp op = ReduceOp::sum) override;
  std::vector<Tensor> all_to_all(const std::vector<Tensor>& inputs) override;
  void broadcast(Tensor& tensor, int root) override;
  void send(const Tensor& tensor, int peer, int tag = 0) override;
  void recv(Tensor& tensor, int peer, int tag = 0) override;
  void barrier() override;
  std::shared_ptr<Group> split(const std::vector<int>& ranks) override;

  // Whether the group's reductions and gathers move data through shared
  // memory (decided, with the other ranks, at the first of them; false
  // before it).
  bool uses_shared_memory() const { return shared_memory_ != nullptr; }

 private:
  // Shares the parent's TCP device; used by split().
  GlooGroup(const GlooGroup& parent, std::string prefix, std::vector<int> ranks);
  // One collective's layout check (see the class comment).
  struct Check {
    Check(const char* op_name, Layout layout, std::string rule);
    const char* op;
    Layout mine;
    std::string hint;
    uint32_t tag = 0;       // for the data transfer: sequence number salted with the layout
    bool verified = false;  // peers' layouts compared
    std::unique_ptr<LayoutExchange> exchange;
    ~Check();
  };
  // Rendezvous and connection to every peer, all within `allowed`.
  void connect(const char* op, std::chrono::milliseconds allowed);
  // Posts this rank's layout and, unless this rank has checked it for the
  // op before, waits for the peers' and compares; sets check.tag.
  void begin_check(Check& check);
  // Waits for the peers' layouts and compares them with this rank's.
  void verify(Check& check);
  // Runs the data transfer of `check`, then verifies if begin_check did not.
  template <typename Fn>
  void run_checked(Check& check, Fn&& fn);
  // The mismatch message for the peer at position i of check.exchange, or "".
  std::string error_of_compatible(const Check& check, size_t i) const;
  // send (sending) or recv: headers both ways overlap the data transfer.
  void point_to_point(const char* op, const Tensor& tensor, int peer, int tag, bool sending);
  // all_gather and all_gather_uneven: gathers shapes first, then bytes.
  std::vector<Tensor> gather(const char* op, const Tensor& tensor, bool equal_shapes);
  // Gathers `values.size()` int64 from every rank (the same count everywhere).
  std::vector<int64_t> gather_int64(const char* op, const std::vector<int64_t>& values);
  // Runs a Gloo call, turning its exceptions into tessera::Error naming `op`,
  // the peer whose connection broke, the peers whose process ended and, on
  // a timeout, the peers that never reached the call. `limit` is the time
  // it had (the collective timeout when zero).
  template <typename Fn>
  void run(const char* op, Fn&& fn, std::chrono::milliseconds limit = std::chrono::milliseconds(0));
  // Why a call of this group failed, as seen from the rendezvous store:
  // "; lost rank 2 (process 4242 exited)" and, after a timeout, "; rank 1
  // did not reach this call". "" when nothing is known.
  std::string failure_note(bool timed_out);
  // "rank r of n" for messages.
  std::string where() const;
  // The rank whose address appears in a Gloo message, or -1.
  int peer_in_message(const std::string& message) const;
  uint32_t next_tag() { return tag_++; }
  // Whether collective `op` moves its data through shared memory. The
  // first call decides, with the other ranks (see setup_shared_memory).
  bool in_shared_memory(const char* op);
  // Decides, with the other ranks, whether the collectives use shared
  // memory and maps the segment if so. Runs at the first all_reduce,
  // all-gather, reduce_scatter, all_to_all or barrier (a collective itself,
  // over TCP).
  void setup_shared_memory();

  std::shared_ptr<Store> store_;
  std::string prefix_;
  std::string job_prefix_;
  std::vector<int> job_ranks_;  // the job's rank of each member
  int rank_;
  int size_;
  std::chrono::milliseconds timeout_;
  std::shared_ptr<gloo::transport::Device> device_;
  std::shared_ptr<gloo::Context> context_;
  std::vector<std::string> peer_addresses_;  // "ip:port" each rank listens on
  uint32_t tag_ = 0;
  std::map<std::vector<int>, int> split_counts_;  // same list, same count on every member
  // (op, layout) pairs every peer has confirmed; see the class comment.
  std::set<std::pair<std::string, std::vector<int64_t>>> checked_layouts_;
  std::vector<uint8_t> scratch_;  // reduce_scatter's ring buffers, kept between calls
  bool shared_memory_decided_ = false;
  std::unique_ptr<SharedMemoryCollectives> shared_memory_;  // null: everything over TCP
};

}  // namespace tessera::distributed
