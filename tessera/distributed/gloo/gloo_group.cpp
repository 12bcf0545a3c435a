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

#include <malloc.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <thread>

#include "tessera/core/error.h"
#include "tessera/distributed/collective_checks.h"
#include "tessera/distributed/gloo/layout_exchange.h"
#include "tessera/distributed/gloo/ring_reduce_scatter.h"
#include "tessera/distributed/gloo/shared_memory_collectives.h"
#include "tessera/distributed/rendezvous.h"

namespace tessera::distributed {
namespace {

// Presents our Store to Gloo's rendezvous with every key under `prefix`, so
// the world group and each split rendezvous separately in one directory.
// Gloo's own waits each get the whole timeout; the adapter holds them to
// the connection's one deadline instead.
class StoreAdapter : public gloo::rendezvous::Store {
 public:
  StoreAdapter(distributed::Store& store, std::string prefix, const Deadline& deadline)
      : store_(store), prefix_(std::move(prefix)), deadline_(deadline) {}
  void set(const std::string& key, const std::vector<char>& data) override {
    store_.set(prefix_ + key, data);
  }
  std::vector<char> get(const std::string& key) override {
    wait({key});
    return store_.get(prefix_ + key);
  }
  void wait(const std::vector<std::string>& keys) override {
    std::vector<std::string> full;
    for (const auto& key : keys) full.push_back(prefix_ + key);
    store_.wait(full, deadline_.left());
  }
  void wait(const std::vector<std::string>& keys, const std::chrono::milliseconds&) override {
    wait(keys);
  }

 private:
  distributed::Store& store_;
  std::string prefix_;
  const Deadline& deadline_;
};

// Gloo waits up to five times a pair's timeout for it to connect.
constexpr int kGlooConnectFactor = 5;

// Top bytes of the slots of Tessera's own messages, clear of Gloo's
// collective prefixes (1-8): the layout exchanges, the reduce-scatter ring,
// and send/recv (headers each way, then the data).
constexpr uint64_t kLayoutPrefix = 0x50;
constexpr uint64_t kRingPrefix = 0x51;
constexpr uint64_t kToReceiverPrefix = 0x52;
constexpr uint64_t kToSenderPrefix = 0x53;
constexpr uint64_t kPointDataPrefix = 0x54;
// Layouts each group remembers as checked before it starts over.
constexpr size_t kMaxCheckedLayouts = 4096;

// prefix (8 bits) | tag (32 bits) | low (24 bits).
uint64_t make_slot(uint64_t prefix, uint64_t tag, uint64_t low) {
  return prefix << 56 | (tag & 0xffffffffu) << 24 | (low & 0xffffffu);
}

// The tag of a collective's data: its sequence number salted with the
// layout, so ranks whose layouts differ use different Gloo slots and never
// exchange bytes (two layouts sharing a salt: odds of 2^-32).
uint32_t salted(uint32_t sequence, uint64_t fingerprint) {
  return sequence ^ static_cast<uint32_t>(fingerprint ^ (fingerprint >> 32));
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
                     std::chrono::milliseconds timeout, std::string hostname,
                     std::string job_prefix, std::chrono::milliseconds connect_timeout)
    : store_(std::move(store)),
      prefix_(std::move(prefix)),
      job_prefix_(std::move(job_prefix)),
      rank_(rank),
      size_(size),
      timeout_(timeout) {
  TESSERA_CHECK(store_ != nullptr, "[init_process_group] the store is null");
  TESSERA_CHECK(size_ >= 1 && rank_ >= 0 && rank_ < size_, "[init_process_group] rank ", rank_,
                " is outside [0, ", size_, ")");
  TESSERA_CHECK(timeout_.count() > 0, "[init_process_group] timeout must be positive, got ",
                timeout_.count(), " ms");
  // Gloo's collectives allocate scratch per call (a ring all-reduce of 4 MiB
  // takes 4 MiB). Above glibc's mmap threshold every call would map fresh
  // pages and the kernel would zero them: a fifth of a data-parallel step.
  // Keeping such blocks in the heap lets calls reuse them.
  static const bool heap_tuned = [] {
    mallopt(M_MMAP_THRESHOLD, 256 << 20);
    mallopt(M_TRIM_THRESHOLD, 512 << 20);
    return true;
  }();
  (void)heap_tuned;
  // Writing to a peer that died raises SIGPIPE, whose default action ends
  // the process without a word. Ignored, the write fails with EPIPE and the
  // collective raises an error naming the lost rank. A handler the program
  // installed itself is left alone.
  static const bool pipe_ignored = [] {
    struct sigaction current {};
    if (sigaction(SIGPIPE, nullptr, &current) == 0 && current.sa_handler == SIG_DFL) {
      signal(SIGPIPE, SIG_IGN);
    }
    return true;
  }();
  (void)pipe_ignored;
  gloo::transport::tcp::attr attr;
  attr.hostname = hostname;
  try {
    device_ = gloo::transport::tcp::CreateDevice(attr);
  } catch (const std::exception& error) {
    TESSERA_FAIL("[init_process_group] ", where(), ": cannot open a TCP device on '", hostname,
                 "': ", error.what());
  }
  for (int member = 0; member < size_; ++member) job_ranks_.push_back(member);
  connect("init_process_group", connect_timeout.count() > 0 ? connect_timeout : timeout_);
}

GlooGroup::GlooGroup(const GlooGroup& parent, std::string prefix, std::vector<int> ranks)
    : store_(parent.store_),
      prefix_(std::move(prefix)),
      job_prefix_(parent.job_prefix_),
      rank_(check_split(ranks, parent.size_, parent.rank_, parent.where())),
      size_(static_cast<int>(ranks.size())),
      timeout_(parent.timeout_),
      device_(parent.device_) {
  for (int member : ranks) job_ranks_.push_back(parent.job_ranks_[static_cast<size_t>(member)]);
  connect("split", timeout_);
}

// Collectives still on the communication thread use this group: they finish first.
GlooGroup::~GlooGroup() {
  wait_launched();
}

GlooGroup::Check::Check(const char* op_name, Layout layout, std::string rule)
    : op(op_name), mine(std::move(layout)), hint(std::move(rule)) {}
GlooGroup::Check::~Check() = default;

void GlooGroup::connect(const char* op, std::chrono::milliseconds allowed) {
  const Deadline deadline(allowed);
  auto context = std::make_shared<gloo::rendezvous::Context>(rank_, size_);
  // The pairs take their connect timeout from the context, and Gloo waits
  // five of them: a fifth keeps a peer that never answers within `allowed`.
  context->setTimeout(std::max(std::chrono::milliseconds(1), allowed / kGlooConnectFactor));
  StoreAdapter adapter(*store_, prefix_, deadline);
  // A failure names the whole allowance: for init it was one deadline of
  // timeout_ for the rendezvous and this connection together.
  run(
      op, [&] { context->connectFullMesh(adapter, device_); }, timeout_);
  context->setTimeout(timeout_);
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
void GlooGroup::run(const char* op, Fn&& fn, std::chrono::milliseconds limit) {
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
  const auto waited = limit.count() > 0 ? limit : timeout_;
  std::string what =
      timed_out ? str_cat("timed out after ", waited.count(), " ms") : std::string("failed");
  what += failure_note(timed_out);
  // The peer named is the one whose connection broke; it may itself have
  // failed because another rank died first (failure_note names that one).
  if (peer >= 0) what += str_cat("; lost the connection to rank ", peer);
  TESSERA_FAIL("[", op, "] ", where(), " ", what, " (", message, ")");
}

std::string GlooGroup::failure_note(bool timed_out) {
  std::string note;
  std::vector<int> peers;
  for (int member = 0; member < size_; ++member)
    if (member != rank_) peers.push_back(job_ranks_[static_cast<size_t>(member)]);
  const int self = job_ranks_[static_cast<size_t>(rank_)];
  std::string ended = ended_ranks(*store_, job_prefix_, peers, self);
  if (ended.empty() && !timed_out && size_ > 1) {
    // A killed peer's sockets close while its process is still exiting, a
    // moment before it shows as ended: give it up to a second to show.
    const auto settle = std::chrono::steady_clock::now() +
                        std::min(timeout_, std::chrono::milliseconds(1000));
    while (ended.empty() && std::chrono::steady_clock::now() < settle) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
      ended = ended_ranks(*store_, job_prefix_, peers, self);
    }
  }
  if (!ended.empty()) note += "; lost " + ended;
  if (!timed_out || !ended.empty() || size_ == 1) return note;
  // Every rank that times out marks the call in the store; a peer that is
  // alive but leaves no mark within a moment never reached it.
  const std::string call = str_cat(job_prefix_, "timeout/", prefix_, tag_, "/");
  try {
    store_->set(call + std::to_string(rank_), {'1'});
    const Deadline deadline(std::min(timeout_, std::chrono::milliseconds(1000)));
    std::vector<int> absent;
    for (int member = 0; member < size_; ++member) {
      if (member == rank_) continue;
      try {
        store_->wait({call + std::to_string(member)}, deadline.left());
      } catch (const Error&) {
        absent.push_back(job_ranks_[static_cast<size_t>(member)]);
      }
    }
    for (size_t i = 0; i < absent.size(); ++i)
      note += str_cat(i == 0 ? "; waiting on rank " : ", rank ", absent[i]);
    if (!absent.empty()) note += ", alive but not in this call";
  } catch (const std::exception&) {
    // The store is unreachable: the timeout alone is reported.
  }
  return note;
}

void GlooGroup::begin_check(Check& check) {
  const uint32_t sequence = next_tag();
  check.tag = salted(sequence, check.mine.fingerprint());
  if (size_ == 1) {
    check.verified = true;
    return;
  }
  std::vector<int> peers;
  for (int peer = 0; peer < size_; ++peer) {
    if (peer != rank_) peers.push_back(peer);
  }
  const uint64_t slot = make_slot(kLayoutPrefix, sequence, 0);
  run(check.op, [&] {
    check.exchange = std::make_unique<LayoutExchange>(*context_, check.mine, peers, slot, slot);
  });
  auto key = std::make_pair(std::string(check.op), check.mine.encode());
  if (checked_layouts_.count(key) != 0) return;
  verify(check);
  // Bounds the memory of programs whose shapes keep changing. Forgetting is
  // safe: a rank that waits while its peers do not still matches them.
  if (checked_layouts_.size() >= kMaxCheckedLayouts) checked_layouts_.clear();
  checked_layouts_.insert(std::move(key));
}

void GlooGroup::verify(Check& check) {
  if (check.verified) return;
  run(check.op, [&] { check.exchange->wait(timeout_); });
  const std::vector<int>& peers = check.exchange->peers();
  for (size_t i = 0; i < peers.size(); ++i) {
    check_compatible(check.op, check.mine, rank_, check.exchange->received(i), peers[i], true,
                     where(), check.hint);
  }
  check.verified = true;
}

template <typename Fn>
void GlooGroup::run_checked(Check& check, Fn&& fn) {
  try {
    run(check.op, std::forward<Fn>(fn));
  } catch (const Error& failure) {
    if (check.verified) throw;
    // This rank skipped waiting for the peers' layouts (it had checked its
    // own before). If they differ, that is why the transfer failed: say so.
    std::string mismatch;
    try {
      check.exchange->wait(std::chrono::milliseconds(200));
      const std::vector<int>& peers = check.exchange->peers();
      for (size_t i = 0; i < peers.size() && mismatch.empty(); ++i) {
        mismatch = error_of_compatible(check, i);
      }
    } catch (const std::exception&) {
      // The layouts did not arrive either; the failure speaks for itself.
    }
    if (!mismatch.empty())
      TESSERA_FAIL(mismatch, " (the transfer then failed: ", failure.what(), ")");
    throw;
  }
  verify(check);
}

std::string GlooGroup::error_of_compatible(const Check& check, size_t i) const {
  try {
    check_compatible(check.op, check.mine, rank_, check.exchange->received(i),
                     check.exchange->peers()[i], true, where(), check.hint);
  } catch (const Error& error) {
    return error.what();
  }
  return "";
}

void GlooGroup::all_reduce(Tensor& tensor, ReduceOp op) {
  wait_launched();  // after what is in flight on this group, in one order
  check_tensor("all_reduce", tensor, kReduceDTypes, where());
  count_traffic(tensor);
  if (in_shared_memory("all_reduce")) {
    // Checks the ranks' layouts itself, in shared memory: no TCP at all.
    return shared_memory_->all_reduce(tensor.raw_data(), layout_of(tensor), op);
  }
  Check check{"all_reduce", layout_of(tensor), ""};
  begin_check(check);
  if (tensor.numel() == 0) return verify(check);
  gloo::AllreduceOptions options(context_);
  TESSERA_DISPATCH_NUMERIC(tensor.dtype(), "all_reduce", [&] {
    options.setOutput(tensor.data<scalar_t>(), static_cast<size_t>(tensor.numel()));
    options.setReduceFunction([op](void* c, const void* a, const void* b, size_t n) {
      reduce_values<scalar_t>(op, c, a, b, n);
    });
  });
  options.setTag(check.tag);
  options.setTimeout(timeout_);
  run_checked(check, [&] { gloo::allreduce(options); });
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
  wait_launched();  // after what is in flight on this group, in one order
  return gather("all_gather", tensor, true);
}

std::vector<Tensor> GlooGroup::all_gather_uneven(const Tensor& tensor) {
  wait_launched();  // after what is in flight on this group, in one order
  return gather("all_gather_uneven", tensor, false);
}

void GlooGroup::all_gather_into(const Tensor& piece, const Tensor& out, int64_t dim,
                                const std::vector<int64_t>& sizes) {
  wait_launched();  // after what is in flight on this group, in one order
  // In shared memory each chunk goes straight from the segment into its
  // block of `out`: no gathered copy beside it. Either way every rank runs
  // one uneven gather of its flat piece.
  if (out.is_contiguous() && out.device().type == DeviceType::cpu && out.dtype() == piece.dtype() &&
      dim >= 0 && dim < out.dim() && sizes.size() == static_cast<size_t>(size_) &&
      in_shared_memory("all_gather")) {
    const Tensor flat = piece.contiguous().reshape({-1});
    check_tensor("all_gather", flat, kMoveDTypes, where());
    count_traffic(flat);
    shared_memory_->all_gather_into(flat, out, dim, sizes);
    return;
  }
  Group::all_gather_into(piece, out, dim, sizes);
}

std::vector<Tensor> GlooGroup::gather(const char* op, const Tensor& tensor, bool equal_shapes) {
  check_tensor(op, tensor, kMoveDTypes, where());
  count_traffic(tensor);
  TESSERA_CHECK(equal_shapes || tensor.dim() >= 1, "[", op, "] ", where(),
                ": needs at least one dimension to vary, got a 0-d tensor");
  const char* hint =
      "every rank needs the same dtype and shape (all_gather_uneven allows dim 0 to differ)";
  if (in_shared_memory(op)) return shared_memory_->all_gather(op, tensor, equal_shapes, hint);
  const Layout mine = layout_of(tensor);
  std::vector<int64_t> rows(size_, mine.rows());
  Check check{op, mine, hint};
  if (equal_shapes) {
    begin_check(check);  // cached: no round trip once this layout has been checked
  } else {
    // The receivers must learn every rank's row count: always a round trip.
    const std::vector<int64_t> all = gather_int64(op, mine.encode());
    for (int peer = 0; peer < size_; ++peer) {
      const Layout theirs = Layout::decode(all, peer);
      check_compatible(op, mine, rank_, theirs, peer, false, where());
      rows[peer] = theirs.rows();
    }
    check.tag = next_tag();
    check.verified = true;
  }
  // Gathered straight into one tensor; the pieces are views of it, so no copy follows.
  const GatheredRows layout(std::move(rows));
  std::vector<size_t> bytes(size_);
  size_t total = 0;
  for (int peer = 0; peer < size_; ++peer) {
    bytes[peer] = static_cast<size_t>(layout.rows[peer] * mine.row_bytes);
    total += bytes[peer];
  }
  Tensor gathered = Tensor::empty(layout.shape_of(tensor.shape()), tensor.dtype());
  if (total > 0) {
    gloo::AllgathervOptions options(context_);
    options.setInput(static_cast<uint8_t*>(tensor.raw_data()), bytes[rank_]);
    options.setOutput(static_cast<uint8_t*>(gathered.raw_data()), bytes);
    options.setTag(check.tag);
    options.setTimeout(timeout_);
    run_checked(check, [&] { gloo::allgatherv(options); });
  } else {
    verify(check);
  }
  return layout.pieces(gathered, tensor.shape());
}

std::vector<Tensor> GlooGroup::all_to_all(const std::vector<Tensor>& inputs) {
  wait_launched();  // after what is in flight on this group, in one order
  check_per_rank("all_to_all", inputs, size_, kMoveDTypes, false, where());
  count_traffic(inputs);
  if (in_shared_memory("all_to_all")) {
    return shared_memory_->all_to_all(
        inputs, "every rank needs pieces of the same dtype and shape but for dim 0");
  }
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
    for (int dest = 0; dest < size_; ++dest)
      job_rows += all[peer * stride + Layout::kFields + dest];
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
  wait_launched();  // after what is in flight on this group, in one order
  check_per_rank("reduce_scatter", inputs, size_, kReduceDTypes, true, where());
  count_traffic(inputs);
  const char* hint = "every rank needs inputs of the same dtype and shape";
  if (in_shared_memory("reduce_scatter")) return shared_memory_->reduce_scatter(inputs, op, hint);
  Check check{"reduce_scatter", layout_of(inputs[0]), hint};
  begin_check(check);
  Tensor result = Tensor::empty(inputs[0].shape(), inputs[0].dtype());
  if (result.numel() == 0) {
    verify(check);
    return result;
  }
  std::vector<const void*> pointers;
  for (const Tensor& input : inputs) pointers.push_back(input.raw_data());
  run_checked(check, [&] {
    ring_reduce_scatter(*context_, pointers, result.raw_data(), static_cast<size_t>(result.numel()),
                        result.dtype(), op, make_slot(kRingPrefix, check.tag, 0), timeout_,
                        scratch_);
  });
  return result;
}

namespace {

// `text` in a zero-padded u8 tensor of `bytes` (truncated to fit, NUL kept).
Tensor text_tensor(const std::string& text, int64_t bytes) {
  Tensor out = Tensor::empty({bytes}, DType::u8);
  std::memset(out.raw_data(), 0, static_cast<size_t>(bytes));
  std::memcpy(out.raw_data(), text.data(), std::min(text.size(), static_cast<size_t>(bytes - 1)));
  return out;
}

}  // namespace

bool GlooGroup::in_shared_memory(const char* op) {
  // Every rank reaches its first such collective together (SPMD), whatever the shape.
  if (!shared_memory_decided_) {
    try {
      setup_shared_memory();
    } catch (const Error& error) {
      TESSERA_FAIL("[", op, "] ", where(), " failed choosing its transport: ", error.what());
    }
  }
  return shared_memory_ != nullptr;
}

void GlooGroup::setup_shared_memory() {
  shared_memory_decided_ = true;  // the collectives below run over TCP
  if (size_ == 1) return;
  const char* setting = std::getenv("TESSERA_SHARED_MEMORY");
  const bool wanted = setting == nullptr || std::string(setting) != "0";
  // Same machine and nobody opted out: then every rank sees the same text.
  constexpr int64_t kIdentityBytes = 320;
  const std::vector<Tensor> identities =
      all_gather(text_tensor(str_cat(wanted ? "on " : "off ", machine_identity()), kIdentityBytes));
  for (const Tensor& identity : identities) {
    if (!wanted ||
        std::memcmp(identity.raw_data(), identities[0].raw_data(), kIdentityBytes) != 0) {
      return;
    }
  }
  // Rank 0 makes the segment and tells the others its name ("" on failure).
  std::unique_ptr<SharedMemoryCollectives> reducer;
  constexpr int64_t kNameBytes = 64;
  Tensor name = text_tensor("", kNameBytes);
  if (rank_ == 0) {
    try {
      const std::string fresh = SharedMemoryCollectives::fresh_name();
      reducer =
          std::make_unique<SharedMemoryCollectives>(fresh, true, rank_, size_, timeout_, where());
      name = text_tensor(fresh, kNameBytes);
    } catch (const Error&) {
      // No shared memory here (e.g. no /dev/shm): every rank stays on TCP.
    }
  }
  broadcast(name, 0);
  const std::string segment(static_cast<const char*>(name.raw_data()));
  if (rank_ != 0 && !segment.empty()) {
    try {
      reducer = std::make_unique<SharedMemoryCollectives>(segment, false, rank_, size_, timeout_,
                                                          where());
    } catch (const Error&) {
      // Reported through the vote below; every rank stays on TCP.
    }
  }
  // Used only if every rank has it mapped; then its name can go.
  Tensor mapped = Tensor::from_vector<int32_t>({reducer != nullptr ? 1 : 0}, {1});
  all_reduce(mapped, ReduceOp::min);
  if (reducer != nullptr) reducer->unlink();
  if (mapped.item<int32_t>() == 1) shared_memory_ = std::move(reducer);
}

void GlooGroup::broadcast(Tensor& tensor, int root) {
  wait_launched();  // after what is in flight on this group, in one order
  check_tensor("broadcast", tensor, kMoveDTypes, where());
  check_peer("broadcast", root, size_, true, rank_, where());
  count_traffic(tensor);
  if (in_shared_memory("broadcast")) {
    return shared_memory_->broadcast(tensor.raw_data(), layout_of(tensor), root);
  }
  Check check{"broadcast", layout_of(tensor), ""};
  begin_check(check);
  if (tensor.numel() == 0) return verify(check);
  gloo::BroadcastOptions options(context_);
  options.setOutput(static_cast<uint8_t*>(tensor.raw_data()),
                    static_cast<size_t>(tensor.numel()) * dtype_size(tensor.dtype()));
  options.setRoot(root);
  options.setTag(check.tag);
  options.setTimeout(timeout_);
  run_checked(check, [&] { gloo::broadcast(options); });
}

void GlooGroup::send(const Tensor& tensor, int peer, int tag) {
  wait_launched();  // after what is in flight on this group, in one order
  check_tensor("send", tensor, kMoveDTypes, where());
  check_peer("send", peer, size_, false, rank_, where());
  TESSERA_CHECK(tag >= 0, "[send] ", where(), ": tag must be >= 0, got ", tag);
  point_to_point("send", tensor, peer, tag, true);
}

void GlooGroup::recv(Tensor& tensor, int peer, int tag) {
  wait_launched();  // after what is in flight on this group, in one order
  check_tensor("recv", tensor, kMoveDTypes, where());
  check_peer("recv", peer, size_, false, rank_, where());
  TESSERA_CHECK(tag >= 0, "[recv] ", where(), ": tag must be >= 0, got ", tag);
  point_to_point("recv", tensor, peer, tag, false);
}

void GlooGroup::point_to_point(const char* op, const Tensor& tensor, int peer, int tag,
                               bool sending) {
  const Layout mine = layout_of(tensor);
  const size_t bytes = static_cast<size_t>(tensor.numel()) * dtype_size(tensor.dtype());
  // Both sides post their header and the data at once, so the headers cost
  // no extra round trip; the data slot carries (dtype, numel), so a
  // mismatched pair never moves bytes and the headers name both sides.
  const uint64_t size_key = (static_cast<uint64_t>(mine.dtype) << 48) ^
                            static_cast<uint64_t>(mine.numel) * 0x9E3779B97F4A7C15ull;
  const uint64_t outgoing = make_slot(sending ? kToReceiverPrefix : kToSenderPrefix, tag, 0);
  const uint64_t incoming = make_slot(sending ? kToSenderPrefix : kToReceiverPrefix, tag, 0);
  const uint64_t data_slot = make_slot(kPointDataPrefix, tag, size_key ^ (size_key >> 24));
  std::unique_ptr<LayoutExchange> exchange;
  std::unique_ptr<gloo::transport::UnboundBuffer> data;
  run(op, [&] {
    exchange = std::make_unique<LayoutExchange>(*context_, mine, std::vector<int>{peer}, outgoing,
                                                incoming);
    if (bytes > 0) {
      data = context_->createUnboundBuffer(tensor.raw_data(), bytes);
      if (sending) {
        data->send(peer, data_slot);
      } else {
        data->recv(peer, data_slot);
      }
    }
    exchange->wait(timeout_);
  });
  check_same_size(op, mine, rank_, exchange->received(0), peer, where());
  if (!data) return;
  run(op, [&] {
    const bool done = sending ? data->waitSend(timeout_) : data->waitRecv(timeout_);
    TESSERA_CHECK(done, "timed out ", sending ? "sending to" : "receiving from", " rank ", peer);
  });
}

void GlooGroup::barrier() {
  wait_launched();  // after what is in flight on this group, in one order
  if (in_shared_memory("barrier")) {
    shared_memory_->barrier();
    return;
  }
  gloo::BarrierOptions options(context_);
  options.setTag(next_tag());
  options.setTimeout(timeout_);
  run("barrier", [&] { gloo::barrier(options); });
}

std::shared_ptr<Group> GlooGroup::split(const std::vector<int>& ranks) {
  wait_launched();  // after what is in flight on this group, in one order
  check_split(ranks, size_, rank_, where());
  std::string prefix =
      prefix_ + "split" + ranks_str(ranks) + "#" + std::to_string(split_counts_[ranks]++) + "/";
  return std::shared_ptr<Group>(new GlooGroup(*this, std::move(prefix), ranks));
}

}  // namespace tessera::distributed
