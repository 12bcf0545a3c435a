#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <memory>
#include <vector>

#include "tessera/distributed/collective_checks.h"

namespace gloo {
class Context;
namespace transport {
class UnboundBuffer;
}
}  // namespace gloo

namespace tessera::distributed {

// Sends this rank's tensor layout to some peers and receives theirs, as
// small Gloo messages posted at construction. Posting costs no round trip;
// wait() blocks only until the peers' layouts are here, which lets a caller
// overlap the exchange with the data transfer it guards.
class LayoutExchange {
 public:
  // Posts `mine` to every rank in `peers` on `send_slot` and receives theirs on `recv_slot`.
  LayoutExchange(gloo::Context& context, const Layout& mine, std::vector<int> peers,
                 uint64_t send_slot, uint64_t recv_slot);
  ~LayoutExchange();
  LayoutExchange(const LayoutExchange&) = delete;
  LayoutExchange& operator=(const LayoutExchange&) = delete;

  // Waits up to `timeout` for every receive and send; throws on a timeout or a lost peer.
  void wait(std::chrono::milliseconds timeout);
  // Whether wait() has returned.
  bool done() const { return done_; }
  // The peers, in the order given.
  const std::vector<int>& peers() const { return peers_; }
  // What peers()[i] sent; valid once done().
  Layout received(size_t i) const { return Layout::decode(theirs_[i].data()); }

 private:
  std::vector<int> peers_;
  std::vector<int64_t> mine_;
  std::vector<std::array<int64_t, Layout::kFields>> theirs_;
  std::unique_ptr<gloo::transport::UnboundBuffer> send_;
  std::vector<std::unique_ptr<gloo::transport::UnboundBuffer>> receives_;
  bool done_ = false;
};

}  // namespace tessera::distributed
