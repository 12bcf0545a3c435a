#include "tessera/distributed/gloo/gloo_group.h"

#include <gloo/allgatherv.h>
#include <gloo/allreduce.h>
#include <gloo/alltoallv.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/common/error.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/store.h>
#include <gloo/transport/tcp/address.h>
#include <gloo/transport/tcp/device.h>
#include <gloo/transport/unbound_buffer.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <functional>
#include <set>

#include "tessera/core/error.h"
#include "tessera/distributed/collective_checks.h"

namespace tessera::distributed {
namespace {

// Presents our Store to Gloo's rendezvous with every key under `prefix`, so
// the world group and each split rendezvous separately in one directory.
class StoreAdapter : public gloo::rendezvous::Store {
 public:
  StoreAdapter(distributed::Store& store, std::string prefix)
      : store_(store), prefix_(std::move(prefix)) {}
  void set(const std::string& key, const std::vector<char>& data) override {
    store_.set(prefix_ + key, data);
  }
  std::vector<char> get(const std::string& key) override { return store_.get(prefix_ + key); }
  void wait(const std::vector<std::string>& keys) override { wait(keys, store_.timeout()); }
  void wait(const std::vector<std::string>& keys,
            const std::chrono::milliseconds& timeout) override {
    std::vector<std::string> full;
    for (const auto& key : keys) full.push_back(prefix_ + key);
    store_.wait(full, timeout);
  }

 private:
  distributed::Store& store_;
  std::string prefix_;
};

template <typename T>
void reduce_values(ReduceOp op, void* out, const void* a, const void* b, size_t n) {
  T* c = static_cast<T*>(out);
  const T* x = static_cast<const T*>(a);
  const T* y = static_cast<const T*>(b);
  switch (op) {
    case ReduceOp::sum:
      for (size_t i = 0; i < n; ++i) c[i] = x[i] + y[i];
      break;
    case ReduceOp::max:
      for (size_t i = 0; i < n; ++i) c[i] = std::max(x[i], y[i]);
      break;
    case ReduceOp::min:
      for (size_t i = 0; i < n; ++i) c[i] = std::min(x[i], y[i]);
      break;
  }
}

// Reads the "host:port" out of one encoded Gloo TCP address.
std::string host_port(const std::vector<char>& bytes) {
  std::string text = gloo::transport::tcp::Address(bytes).str();
  const size_t dollar = text.find('$');  // sequence number suffix, if any
  if (dollar != std::string::npos) text.resize(dollar);
  text.erase(std::remove(text.begin(), text.end(), '['), text.end());
  text.erase(std::remove(text.begin(), text.end(), ']'), text.end());
  return text;
}

}  // namespace

GlooGroup::GlooGroup(std::shared_ptr<Store> store, std::string prefix, int rank, int size,
                     std::chrono::milliseconds timeout, std::string hostname)
    : store_(std::move(store)),
      prefix_(std::move(prefix)),
      rank_(rank),
      size_(size),
      timeout_(timeout) {
  TESSERA_CHECK(store_ != nullptr, "[init_process_group] the store is null");
  TESSERA_CHECK(size_ >= 1 && rank_ >= 0 && rank_ < size_, "[init_process_group] rank ", rank_,
                " is outside [0, ", size_, ")");
  TESSERA_CHECK(timeout_.count() > 0, "[init_process_group] timeout must be positive, got ",
                timeout_.count(), " ms");
  gloo::transport::tcp::attr attr;
  attr.hostname = hostname;
  try {
    device_ = gloo::transport::tcp::CreateDevice(attr);
  } catch (const std::exception& error) {
    TESSERA_FAIL("[init_process_group] ", where(), ": cannot open a TCP device on '", hostname,
                 "': ", error.what());
  }
  connect("init_process_group");
}

GlooGroup::GlooGroup(std::shared_ptr<Store> store, std::string prefix, int rank, int size,
                     std::chrono::milliseconds timeout,
                     std::shared_ptr<gloo::transport::Device> device)
    : store_(std::move(store)),
      prefix_(std::move(prefix)),
      rank_(rank),
      size_(size),
      timeout_(timeout),
      device_(std::move(device)) {
  connect("split");
}

GlooGroup::~GlooGroup() = default;

void GlooGroup::connect(const char* op) {
  auto context = std::make_shared<gloo::rendezvous::Context>(rank_, size_);
  context->setTimeout(timeout_);
  StoreAdapter adapter(*store_, prefix_);
  run(op, [&] { context->connectFullMesh(adapter, device_); });
  context_ = context;
  // Gloo stores each rank's pair addresses under its rank; all pairs of one
  // rank share its listening socket, so the first tells where it listens.
  peer_addresses_.assign(size_, "");
  if (size_ == 1) return;
  for (int peer = 0; peer < size_; ++peer) {
    if (peer == rank_) continue;
    try {
      std::vector<char> all = store_->get(prefix_ + std::to_string(peer));
      const size_t each = all.size() / static_cast<size_t>(size_ - 1);
      peer_addresses_[peer] = host_port(std::vector<char>(all.begin(), all.begin() + each));
    } catch (const std::exception&) {
      // Only used to name a lost peer in messages; the group works without it.
    }
  }
}

std::string GlooGroup::where() const {
  return str_cat("rank ", rank_, " of ", size_);
}

int GlooGroup::peer_in_message(const std::string& message) const {
  // Gloo writes "[ip]:port"; peer_addresses_ hold "ip:port".
  std::string text = message;
  text.erase(std::remove(text.begin(), text.end(), '['), text.end());
  text.erase(std::remove(text.begin(), text.end(), ']'), text.end());
  for (int peer = 0; peer < static_cast<int>(peer_addresses_.size()); ++peer) {
    const std::string& address = peer_addresses_[peer];
    if (address.empty()) continue;
    for (size_t at = text.find(address); at != std::string::npos; at = text.find(address, at + 1)) {
      const size_t end = at + address.size();
      if (end == text.size() || !std::isdigit(static_cast<unsigned char>(text[end]))) return peer;
    }
  }
  return -1;
}

template <typename Fn>
void GlooGroup::run(const char* op, Fn&& fn) {
  std::string message;
  try {
    fn();
    return;
  } catch (const tessera::Error& error) {
    message = error.what();
  } catch (const gloo::EnforceNotMet& error) {
    message = error.what();
  } catch (const std::exception& error) {
    message = error.what();
  }
  const bool timed_out =
      message.find("imed out") != std::string::npos || message.find("imeout") != std::string::npos;
  const int peer = peer_in_message(message);
  std::string what =
      timed_out ? str_cat("timed out after ", timeout_.count(), " ms") : std::string("failed");
  // The peer named is the one whose connection broke; it may itself have
  // failed because another rank died first.
  if (peer >= 0) what += str_cat("; lost the connection to rank ", peer);
  TESSERA_FAIL("[", op, "] ", where(), " ", what, " (", message, ")");
}

void GlooGroup::all_reduce(Tensor& tensor, ReduceOp op) {
  check_tensor("all_reduce", tensor, kReduceDTypes, where());
  if (tensor.numel() == 0) return;
  gloo::AllreduceOptions options(context_);
  TESSERA_DISPATCH_NUMERIC(tensor.dtype(), "all_reduce", [&] {
    options.setOutput(tensor.data<scalar_t>(), static_cast<size_t>(tensor.numel()));
    options.setReduceFunction([op](void* c, const void* a, const void* b, size_t n) {
      reduce_values<scalar_t>(op, c, a, b, n);
    });
  });
  options.setTag(next_tag());
  options.setTimeout(timeout_);
  run("all_reduce", [&] { gloo::allreduce(options); });
}

std::vector<int64_t> GlooGroup::gather_int64(const char* op, const std::vector<int64_t>& values) {
  std::vector<int64_t> out(values.size() * static_cast<size_t>(size_));
  gloo::AllgathervOptions options(context_);
  std::vector<int64_t> input = values;
  options.setInput(input.data(), input.size());
  options.setOutput(out.data(), std::vector<size_t>(size_, values.size()));
  options.setTag(next_tag());
  options.setTimeout(timeout_);
  run(op, [&] { gloo::allgatherv(options); });
  return out;
}

std::vector<Tensor> GlooGroup::all_gather(const Tensor& tensor) {
  return gather("all_gather", tensor, true);
}

std::vector<Tensor> GlooGroup::all_gather_uneven(const Tensor& tensor) {
  return gather("all_gather_uneven", tensor, false);
}

std::vector<Tensor> GlooGroup::gather(const char* op, const Tensor& tensor, bool equal_shapes) {
  check_tensor(op, tensor, kMoveDTypes, where());
  TESSERA_CHECK(equal_shapes || tensor.dim() >= 1, "[", op, "] ", where(),
                ": needs at least one dimension to vary, got a 0-d tensor");
  const Layout mine = layout_of(tensor);
  const std::vector<int64_t> all = gather_int64(op, mine.encode());
  std::vector<Layout> layouts;
  for (int peer = 0; peer < size_; ++peer) {
    layouts.push_back(Layout::decode(all, peer));
    check_compatible(op, mine, rank_, layouts.back(), peer, equal_shapes, where());
  }
  std::vector<size_t> bytes(size_);
  size_t total = 0;
  for (int peer = 0; peer < size_; ++peer) {
    bytes[peer] = static_cast<size_t>(layouts[peer].rows * layouts[peer].row_bytes);
    total += bytes[peer];
  }
  std::vector<uint8_t> buffer(total);
  if (total > 0) {
    gloo::AllgathervOptions options(context_);
    options.setInput(static_cast<uint8_t*>(tensor.raw_data()), bytes[rank_]);
    options.setOutput(buffer.data(), bytes);
    options.setTag(next_tag());
    options.setTimeout(timeout_);
    run(op, [&] { gloo::allgatherv(options); });
  }
  std::vector<Tensor> out;
  size_t offset = 0;
  for (int peer = 0; peer < size_; ++peer) {
    Shape shape = tensor.shape();
    if (!shape.empty()) shape[0] = layouts[peer].rows;
    Tensor piece = Tensor::empty(shape, tensor.dtype());
    if (bytes[peer] > 0) std::memcpy(piece.raw_data(), buffer.data() + offset, bytes[peer]);
    offset += bytes[peer];
    out.push_back(piece);
  }
  return out;
}

std::vector<Tensor> GlooGroup::all_to_all(const std::vector<Tensor>& inputs) {
  check_per_rank("all_to_all", inputs, size_, kMoveDTypes, false, where());
  // Every rank learns every rank's row counts and layout, so each knows what it receives.
  const Layout mine = layout_of(inputs[0]);
  std::vector<int64_t> header = mine.encode();
  for (const Tensor& input : inputs) header.push_back(input.size(0));
  const size_t stride = header.size();
  const std::vector<int64_t> all = gather_int64("all_to_all", header);
  std::vector<int64_t> send_bytes(size_), recv_bytes(size_), recv_rows(size_);
  for (int peer = 0; peer < size_; ++peer) {
    const Layout theirs = Layout::decode(all, peer, stride);
    check_compatible("all_to_all", mine, rank_, theirs, peer, false, where());
    recv_rows[peer] = all[peer * stride + Layout::kFields + rank_];
    recv_bytes[peer] = recv_rows[peer] * mine.row_bytes;
    send_bytes[peer] = inputs[peer].size(0) * mine.row_bytes;
  }
  std::vector<uint8_t> packed, received;
  for (const Tensor& input : inputs) {
    const auto* begin = static_cast<const uint8_t*>(input.raw_data());
    packed.insert(packed.end(), begin, begin + input.numel() * dtype_size(input.dtype()));
  }
  int64_t total = 0;
  for (int64_t count : recv_bytes) total += count;
  received.resize(static_cast<size_t>(total));
  // Whether anything moves at all must be decided alike on every rank (from
  // the gathered row counts), or a rank with nothing to do would skip the
  // exchange its peers wait in.
  int64_t job_rows = 0;
  for (int peer = 0; peer < size_; ++peer) {
    for (int dest = 0; dest < size_; ++dest) job_rows += all[peer * stride + Layout::kFields + dest];
  }
  if (job_rows > 0 && mine.row_bytes > 0) {
    // Gloo refuses null buffers; a dummy byte stands in for an empty side.
    if (packed.empty()) packed.push_back(0);
    if (received.empty()) received.push_back(0);
    gloo::AlltoallvOptions options(context_);
    options.setInput(packed.data(), send_bytes);
    options.setOutput(received.data(), recv_bytes);
    options.setTag(next_tag());
    options.setTimeout(timeout_);
    run("all_to_all", [&] { gloo::alltoallv(options); });
  }
  std::vector<Tensor> out;
  size_t offset = 0;
  for (int peer = 0; peer < size_; ++peer) {
    Shape shape = inputs[0].shape();
    shape[0] = recv_rows[peer];
    Tensor piece = Tensor::empty(shape, inputs[0].dtype());
    const size_t count = static_cast<size_t>(recv_bytes[peer]);
    if (count > 0) std::memcpy(piece.raw_data(), received.data() + offset, count);
    offset += count;
    out.push_back(piece);
  }
  return out;
}

Tensor GlooGroup::reduce_scatter(const std::vector<Tensor>& inputs, ReduceOp op) {
  check_per_rank("reduce_scatter", inputs, size_, kReduceDTypes, true, where());
  std::vector<Tensor> pieces = all_to_all(inputs);
  Tensor result = pieces[0].clone();
  const size_t count = static_cast<size_t>(result.numel());
  TESSERA_DISPATCH_NUMERIC(result.dtype(), "reduce_scatter", [&] {
    for (int peer = 1; peer < size_; ++peer) {
      TESSERA_CHECK(pieces[peer].shape() == result.shape(), "[reduce_scatter] ", where(), ": rank ",
                    peer, " sent shape ", shape_str(pieces[peer].shape()), " but rank 0 sent ",
                    shape_str(result.shape()), "; all must match");
      reduce_values<scalar_t>(op, result.raw_data(), result.raw_data(), pieces[peer].raw_data(),
                              count);
    }
  });
  return result;
}

void GlooGroup::broadcast(Tensor& tensor, int root) {
  check_tensor("broadcast", tensor, kMoveDTypes, where());
  check_peer("broadcast", root, size_, true, rank_, where());
  if (tensor.numel() == 0) return;
  gloo::BroadcastOptions options(context_);
  options.setOutput(static_cast<uint8_t*>(tensor.raw_data()),
                    static_cast<size_t>(tensor.numel()) * dtype_size(tensor.dtype()));
  options.setRoot(root);
  options.setTag(next_tag());
  options.setTimeout(timeout_);
  run("broadcast", [&] { gloo::broadcast(options); });
}

void GlooGroup::send(const Tensor& tensor, int peer, int tag) {
  check_tensor("send", tensor, kMoveDTypes, where());
  check_peer("send", peer, size_, false, rank_, where());
  TESSERA_CHECK(tag >= 0, "[send] ", where(), ": tag must be >= 0, got ", tag);
  const size_t bytes = static_cast<size_t>(tensor.numel()) * dtype_size(tensor.dtype());
  if (bytes == 0) return;
  run("send", [&] {
    auto buffer = context_->createUnboundBuffer(tensor.raw_data(), bytes);
    buffer->send(peer, static_cast<uint64_t>(tag));
    TESSERA_CHECK(buffer->waitSend(timeout_), "timed out sending to rank ", peer);
  });
}

void GlooGroup::recv(Tensor& tensor, int peer, int tag) {
  check_tensor("recv", tensor, kMoveDTypes, where());
  check_peer("recv", peer, size_, false, rank_, where());
  TESSERA_CHECK(tag >= 0, "[recv] ", where(), ": tag must be >= 0, got ", tag);
  const size_t bytes = static_cast<size_t>(tensor.numel()) * dtype_size(tensor.dtype());
  if (bytes == 0) return;
  run("recv", [&] {
    auto buffer = context_->createUnboundBuffer(tensor.raw_data(), bytes);
    buffer->recv(peer, static_cast<uint64_t>(tag));
    TESSERA_CHECK(buffer->waitRecv(timeout_), "timed out receiving from rank ", peer);
  });
}

void GlooGroup::barrier() {
  gloo::BarrierOptions options(context_);
  options.setTag(next_tag());
  options.setTimeout(timeout_);
  run("barrier", [&] { gloo::barrier(options); });
}

std::shared_ptr<Group> GlooGroup::split(const std::vector<int>& ranks) {
  std::set<int> seen;
  int new_rank = -1;
  for (size_t i = 0; i < ranks.size(); ++i) {
    check_peer("split", ranks[i], size_, true, rank_, where());
    TESSERA_CHECK(seen.insert(ranks[i]).second, "[split] ", where(), ": rank ", ranks[i],
                  " is listed twice");
    if (ranks[i] == rank_) new_rank = static_cast<int>(i);
  }
  TESSERA_CHECK(new_rank >= 0, "[split] ", where(), ": this rank is not in the list ",
                shape_str(std::vector<int64_t>(ranks.begin(), ranks.end())),
                "; only members call split");
  std::string prefix = prefix_ + "split" +
                       shape_str(std::vector<int64_t>(ranks.begin(), ranks.end())) + "#" +
                       std::to_string(split_counts_[ranks]++) + "/";
  return std::shared_ptr<Group>(new GlooGroup(store_, std::move(prefix), new_rank,
                                              static_cast<int>(ranks.size()), timeout_, device_));
}

}  // namespace tessera::distributed
