#include "tessera/distributed/gloo/layout_exchange.h"

#include <gloo/context.h>
#include <gloo/transport/unbound_buffer.h>

#include "tessera/core/error.h"

namespace tessera::distributed {

LayoutExchange::LayoutExchange(gloo::Context& context, const Layout& mine, std::vector<int> peers,
                               uint64_t send_slot, uint64_t recv_slot)
    : peers_(std::move(peers)), mine_(mine.encode()), theirs_(peers_.size()) {
  const size_t bytes = Layout::kFields * sizeof(int64_t);
  send_ = context.createUnboundBuffer(mine_.data(), bytes);
  for (size_t i = 0; i < peers_.size(); ++i) {
    receives_.push_back(context.createUnboundBuffer(theirs_[i].data(), bytes));
    receives_.back()->recv(peers_[i], recv_slot);
    send_->send(peers_[i], send_slot);
  }
}

// A buffer destroyed with operations still pending is dropped by Gloo (its
// pending operations hold weak references), so an abandoned exchange is safe.
LayoutExchange::~LayoutExchange() = default;

void LayoutExchange::wait(std::chrono::milliseconds timeout) {
  if (done_) return;
  for (size_t i = 0; i < peers_.size(); ++i) {
    TESSERA_CHECK(receives_[i]->waitRecv(timeout),
                  "timed out waiting for the tensor layout of rank ", peers_[i]);
  }
  for (size_t i = 0; i < peers_.size(); ++i) {
    TESSERA_CHECK(send_->waitSend(timeout), "timed out sending the tensor layout");
  }
  done_ = true;
}

}  // namespace tessera::distributed
