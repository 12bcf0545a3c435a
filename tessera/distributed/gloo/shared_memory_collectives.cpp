#include "tessera/distributed/gloo/shared_memory_collectives.h"

#include <fcntl.h>
#include <linux/futex.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <climits>
#include <cstring>
#include <ctime>
#include <functional>
#include <optional>

#include "tessera/core/error.h"
#include "tessera/distributed/gloo/ring_reduce_scatter.h"
#include "tessera/distributed/rendezvous.h"

namespace tessera::distributed {
namespace {

constexpr uint32_t kMagic = 0x54534d53;  // "TSMS"
constexpr size_t kLine = 64;
// Per rank: epoch and process id (line 0, the futex word alone in it with
// little else), then two records of two lines each: the call's layout
// (Layout::kFields words), then its collective and reduce op.
constexpr size_t kRecordBytes = 2 * kLine;
constexpr size_t kControlBytes = kLine + 2 * kRecordBytes;
constexpr size_t kCallOffset = Layout::kFields * sizeof(int64_t);
static_assert(kCallOffset + 2 * sizeof(uint32_t) <= kRecordBytes);
constexpr size_t kPage = 4096;

size_t data_offset(int size) {
  const size_t control = kLine + kControlBytes * static_cast<size_t>(size);
  return (control + kPage - 1) / kPage * kPage;
}

// Two alternating sets of (one slot per rank + the shared result).
size_t segment_bytes(int size) {
  return data_offset(size) +
         2 * (static_cast<size_t>(size) + 1) * SharedMemoryCollectives::kSlotBytes;
}

// Sleeps until *word may differ from `seen`, at most `wait`. The segment is
// shared between processes, so the futex is not the private kind.
void futex_wait(uint32_t* word, uint32_t seen, std::chrono::microseconds wait) {
  timespec limit{static_cast<time_t>(wait.count() / 1000000),
                 static_cast<long>(wait.count() % 1000000) * 1000};
  syscall(SYS_futex, word, FUTEX_WAIT, seen, &limit, nullptr, 0);
}

void futex_wake_all(uint32_t* word) {
  syscall(SYS_futex, word, FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
}

std::string errno_text(int code) {
  return std::strerror(code);
}

// memcpy that accepts empty ranges of empty tensors (whose data may be null).
void copy_bytes(uint8_t* to, const uint8_t* from, size_t bytes) {
  if (bytes > 0) std::memcpy(to, from, bytes);
}

}  // namespace

std::string SharedMemoryCollectives::fresh_name() {
  static std::atomic<int> counter{0};
  // Named after the job, so the launcher can unlink a segment whose ranks
  // were killed before they could (tessera-run removes tessera-<job>-*).
  std::string job;
  for (char c : job_id_from_env())
    if (std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.') job += c;
  return str_cat("/tessera-", job.empty() ? "" : job + "-", getpid(), "-", counter.fetch_add(1));
}

SharedMemoryCollectives::SharedMemoryCollectives(std::string name, bool create, int rank, int size,
                                                 std::chrono::milliseconds timeout,
                                                 std::string where)
    : name_(std::move(name)),
      owner_(create),
      rank_(rank),
      size_(size),
      timeout_(timeout),
      where_(std::move(where)) {
  bytes_ = segment_bytes(size_);
  const int fd = create ? shm_open(name_.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600)
                        : shm_open(name_.c_str(), O_RDWR, 0);
  TESSERA_CHECK(fd >= 0, "[shared memory] cannot ", create ? "create" : "open", " segment ", name_,
                ": ", errno_text(errno));
  if (create) {
    // Reserves the pages now: a full /dev/shm is an error here, not a
    // SIGBUS at the first touch in the middle of a collective.
    const int failure = posix_fallocate(fd, 0, static_cast<off_t>(bytes_));
    if (failure != 0) {
      close(fd);
      shm_unlink(name_.c_str());
      TESSERA_FAIL("[shared memory] cannot reserve ", bytes_, " bytes for segment ", name_, ": ",
                   errno_text(failure));
    }
  } else {
    struct stat info {};
    const bool sized = fstat(fd, &info) == 0 && static_cast<size_t>(info.st_size) == bytes_;
    if (!sized) {
      close(fd);
      TESSERA_FAIL("[shared memory] segment ", name_, " has ", info.st_size, " bytes, expected ",
                   bytes_);
    }
  }
  void* mapped = mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  const int map_error = errno;
  close(fd);
  if (mapped == MAP_FAILED) {
    if (create) shm_unlink(name_.c_str());
    TESSERA_FAIL("[shared memory] cannot map segment ", name_, ": ", errno_text(map_error));
  }
  base_ = static_cast<uint8_t*>(mapped);
  data_ = base_ + data_offset(size_);
  auto* header = reinterpret_cast<uint32_t*>(base_);
  if (create) {
    header[1] = static_cast<uint32_t>(size_);
    std::atomic_ref<uint32_t>(header[0]).store(kMagic, std::memory_order_release);
  } else {
    const bool valid =
        std::atomic_ref<uint32_t>(header[0]).load(std::memory_order_acquire) == kMagic &&
        header[1] == static_cast<uint32_t>(size_);
    if (!valid) {
      munmap(base_, bytes_);
      base_ = nullptr;
      TESSERA_FAIL("[shared memory] segment ", name_, " was not made for ", size_, " ranks");
    }
  }
  std::atomic_ref<int32_t>(*pid_word(rank_)).store(getpid(), std::memory_order_release);
}

SharedMemoryCollectives::~SharedMemoryCollectives() {
  if (base_ != nullptr) munmap(base_, bytes_);
  if (owner_) unlink();
}

void SharedMemoryCollectives::unlink() {
  if (!owner_) return;
  shm_unlink(name_.c_str());
  owner_ = false;
}

uint8_t* SharedMemoryCollectives::control(int rank) const {
  return base_ + kLine + kControlBytes * static_cast<size_t>(rank);
}

uint32_t* SharedMemoryCollectives::epoch_word(int rank) const {
  return reinterpret_cast<uint32_t*>(control(rank));
}

int32_t* SharedMemoryCollectives::pid_word(int rank) const {
  return reinterpret_cast<int32_t*>(control(rank) + 4);
}

uint8_t* SharedMemoryCollectives::record(int rank) const {
  return control(rank) + kLine + (call_round_ % 2) * kRecordBytes;
}

int64_t* SharedMemoryCollectives::layout_words(int rank) const {
  return reinterpret_cast<int64_t*>(record(rank));
}

uint32_t* SharedMemoryCollectives::call_word(int rank) const {
  return reinterpret_cast<uint32_t*>(record(rank) + kCallOffset);
}

uint32_t* SharedMemoryCollectives::op_word(int rank) const {
  return reinterpret_cast<uint32_t*>(record(rank) + kCallOffset + sizeof(uint32_t));
}

uint8_t* SharedMemoryCollectives::next_set() {
  return data_ + (rounds_++ % 2) * (static_cast<size_t>(size_) + 1) * kSlotBytes;
}

uint8_t* SharedMemoryCollectives::slot(uint8_t* set, int rank) const {
  return set + static_cast<size_t>(rank) * kSlotBytes;
}

void SharedMemoryCollectives::wait_for(int peer, uint32_t target) {
  uint32_t* word = epoch_word(peer);
  std::atomic_ref<uint32_t> epoch(*word);
  const auto deadline = std::chrono::steady_clock::now() + timeout_;
  for (int attempt = 0;; ++attempt) {
    const uint32_t seen = epoch.load(std::memory_order_acquire);
    if (static_cast<int32_t>(seen - target) >= 0) return;
    // A short spin catches a peer that is nearly there; after that, sleep,
    // since the peer may need this very core to get there.
    if (attempt < 100) {
      __builtin_ia32_pause();
      continue;
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      broken_ = true;
      TESSERA_FAIL("[", op_, "] ", where_, " timed out after ", timeout_.count(),
                   " ms waiting for rank ", peer, " in shared memory");
    }
    const int32_t pid = std::atomic_ref<int32_t>(*pid_word(peer)).load(std::memory_order_acquire);
    if (attempt % 64 == 0 && pid > 0 && kill(pid, 0) != 0 && errno == ESRCH) {
      broken_ = true;
      TESSERA_FAIL("[", op_, "] ", where_, " lost rank ", peer, ": its process ", pid,
                   " exited during the shared-memory ", op_);
    }
    futex_wait(word, seen, std::chrono::microseconds(2000));
  }
}

void SharedMemoryCollectives::arrive_and_wait() {
  ++epoch_;
  uint32_t* mine = epoch_word(rank_);
  std::atomic_ref<uint32_t>(*mine).store(epoch_, std::memory_order_release);
  futex_wake_all(mine);
  for (int peer = 0; peer < size_; ++peer) {
    if (peer != rank_) wait_for(peer, epoch_);
  }
}

namespace {

const char* call_name(uint32_t call) {
  switch (call) {
    case 1:
      return "all_reduce";
    case 2:
      return "all_gather";
    case 3:
      return "all_gather_uneven";
    case 4:
      return "reduce_scatter";
    case 5:
      return "all_to_all";
    case 6:
      return "barrier";
    case 7:
      return "broadcast";
    default:
      return "an unknown collective";
  }
}

}  // namespace

void SharedMemoryCollectives::post(Call call, const Layout& layout, uint32_t argument) {
  TESSERA_CHECK(!broken_, "[", call_name(static_cast<uint32_t>(call)), "] ", where_,
                ": an earlier shared-memory collective failed; the group is unusable");
  op_ = call_name(static_cast<uint32_t>(call));
  call_round_ = rounds_;
  // Posted before the first barrier and compared after it: ranks that
  // disagree all stop there, before any value is mixed, and stay in step.
  const std::vector<int64_t> words = layout.encode();
  std::memcpy(layout_words(rank_), words.data(), words.size() * sizeof(int64_t));
  *call_word(rank_) = static_cast<uint32_t>(call);
  *op_word(rank_) = argument;
}

void SharedMemoryCollectives::check_agreement(Call call, const Layout& mine, uint32_t argument,
                                              bool equal_shapes, const std::string& hint) {
  for (int peer = 0; peer < size_; ++peer) {
    if (peer == rank_) continue;
    const uint32_t theirs = *call_word(peer);
    TESSERA_CHECK(theirs == static_cast<uint32_t>(call), "[", op_, "] ", where_, " calls ", op_,
                  " but rank ", peer, " calls ", call_name(theirs),
                  "; every rank must make the same collective calls in the same order");
    check_compatible(op_, mine, rank_, Layout::decode(layout_words(peer)), peer, equal_shapes,
                     where_, hint);
    if (call == Call::broadcast) {
      TESSERA_CHECK(*op_word(peer) == argument, "[", op_, "] ", where_, " broadcasts from rank ",
                    argument, " but rank ", peer, " from rank ", *op_word(peer),
                    "; every rank must pass the same root");
    }
    if (call != Call::all_reduce && call != Call::reduce_scatter) continue;
    const auto op = static_cast<ReduceOp>(argument);
    const auto their_op = static_cast<ReduceOp>(*op_word(peer));
    TESSERA_CHECK(their_op == op, "[", op_, "] ", where_, " reduces by ", reduce_op_name(op),
                  " but rank ", peer, " by ", reduce_op_name(their_op),
                  "; every rank must pass the same op");
  }
}

void SharedMemoryCollectives::all_reduce(void* data, const Layout& layout, ReduceOp op) {
  post(Call::all_reduce, layout, static_cast<uint32_t>(op));
  const DType dtype = static_cast<DType>(layout.dtype);
  const int64_t count = layout.numel;
  const size_t item = dtype_size(dtype);
  const int64_t per_round = static_cast<int64_t>(kSlotBytes / item);
  auto* values = static_cast<uint8_t*>(data);
  // An empty tensor still takes one round, for the agreement check.
  for (int64_t offset = 0; offset == 0 || offset < count; offset += per_round) {
    const int64_t n = std::min(per_round, count - offset);
    uint8_t* set = next_set();
    uint8_t* result = slot(set, size_);
    uint8_t* chunk = values + offset * item;
    // Rank r reduces slice r (the first n % size slices one value longer).
    const int64_t base = n / size_, extra = n % size_;
    auto slice_start = [&](int r) {
      return static_cast<size_t>(r * base + std::min<int64_t>(r, extra)) * item;
    };
    const size_t mine_start = slice_start(rank_), mine_end = slice_start(rank_ + 1);
    // The peers read only the slices they reduce; this rank reads its own
    // slice from its own memory.
    uint8_t* own = slot(set, rank_);
    copy_bytes(own, chunk, mine_start);
    copy_bytes(own + mine_end, chunk + mine_end, static_cast<size_t>(n) * item - mine_end);
    arrive_and_wait();
    if (offset == 0) check_agreement(Call::all_reduce, layout, static_cast<uint32_t>(op), true, "");
    if (mine_end > mine_start) {
      const size_t length = (mine_end - mine_start) / item;
      auto source = [&](int r) -> const uint8_t* {
        return (r == rank_ ? chunk : slot(set, r)) + mine_start;
      };
      uint8_t* out = result + mine_start;
      TESSERA_DISPATCH_NUMERIC(dtype, "all_reduce", [&] {
        reduce_values<scalar_t>(op, out, source(0), source(1), length);
        for (int peer = 2; peer < size_; ++peer) {
          reduce_values<scalar_t>(op, out, out, source(peer), length);
        }
      });
      copy_bytes(chunk + mine_start, out, mine_end - mine_start);
    }
    arrive_and_wait();
    copy_bytes(chunk, result, mine_start);
    copy_bytes(chunk + mine_end, result + mine_end, static_cast<size_t>(n) * item - mine_end);
  }
}

void SharedMemoryCollectives::gather_rounds(
    const char* op, const Tensor& tensor, bool equal_shapes, const std::string& hint,
    const std::function<void(const std::vector<int64_t>&)>& place, const PutBytes& put) {
  const Call call = equal_shapes ? Call::all_gather : Call::all_gather_uneven;
  const Layout mine = layout_of(tensor);
  post(call, mine, 0);
  op_ = op;
  const auto* own_bytes = static_cast<const uint8_t*>(tensor.raw_data());
  const size_t my_bytes = static_cast<size_t>(mine.rows() * mine.row_bytes);
  // Round 0 also carries the layouts: the pieces' sizes are known after it.
  uint8_t* set = next_set();
  copy_bytes(slot(set, rank_), own_bytes, std::min(my_bytes, kSlotBytes));
  arrive_and_wait();
  check_agreement(call, mine, 0, equal_shapes, hint);
  std::vector<int64_t> rows(static_cast<size_t>(size_));
  for (int peer = 0; peer < size_; ++peer) {
    rows[static_cast<size_t>(peer)] =
        peer == rank_ ? mine.rows() : Layout::decode(layout_words(peer)).rows();
  }
  place(rows);
  size_t most = 0;
  for (int64_t count : rows) most = std::max(most, static_cast<size_t>(count * mine.row_bytes));
  for (size_t done = 0;; done += kSlotBytes) {
    if (done > 0) {
      set = next_set();
      if (done < my_bytes)
        copy_bytes(slot(set, rank_), own_bytes + done, std::min(my_bytes - done, kSlotBytes));
      arrive_and_wait();
    }
    for (int peer = 0; peer < size_; ++peer) {
      const size_t bytes = static_cast<size_t>(rows[static_cast<size_t>(peer)] * mine.row_bytes);
      if (done >= bytes) continue;
      put(peer, done, peer == rank_ ? own_bytes + done : slot(set, peer),
          std::min(bytes - done, kSlotBytes));
    }
    if (done + kSlotBytes >= most) break;
  }
}

std::vector<Tensor> SharedMemoryCollectives::all_gather(const char* op, const Tensor& tensor,
                                                        bool equal_shapes,
                                                        const std::string& hint) {
  const auto row_bytes = static_cast<size_t>(layout_of(tensor).row_bytes);
  std::optional<GatheredRows> placed;
  Tensor gathered;
  uint8_t* out = nullptr;
  gather_rounds(
      op, tensor, equal_shapes, hint,
      [&](const std::vector<int64_t>& rows) {
        placed.emplace(rows);
        gathered = Tensor::empty(placed->shape_of(tensor.shape()), tensor.dtype());
        out = static_cast<uint8_t*>(gathered.raw_data());
      },
      [&](int peer, size_t offset, const uint8_t* from, size_t bytes) {
        const auto first = static_cast<size_t>(placed->first[static_cast<size_t>(peer)]);
        copy_bytes(out + first * row_bytes + offset, from, bytes);
      });
  return placed->pieces(gathered, tensor.shape());
}

void SharedMemoryCollectives::all_gather_into(const Tensor& piece, const Tensor& out, int64_t dim,
                                              const std::vector<int64_t>& sizes) {
  // out is [outer, total, inner] around `dim`; rank q's piece, flat, is
  // [outer, sizes[q], inner], and lands in columns starting[q] of it.
  const size_t item = dtype_size(out.dtype());
  int64_t outer = 1, inner = 1, total = 0;
  for (int64_t d = 0; d < dim; ++d) outer *= out.size(d);
  for (int64_t d = dim + 1; d < out.dim(); ++d) inner *= out.size(d);
  std::vector<size_t> start;
  for (int64_t size : sizes) {
    start.push_back(static_cast<size_t>(total * inner) * item);
    total += size;
  }
  const size_t out_row = static_cast<size_t>(total * inner) * item;
  auto* base = static_cast<uint8_t*>(out.raw_data());
  gather_rounds(
      "all_gather", piece, false, "",
      [&](const std::vector<int64_t>& rows) {
        for (size_t q = 0; q < rows.size(); ++q) {
          const int64_t expected = outer * sizes[q] * inner;
          TESSERA_CHECK(rows[q] == expected, "[all_gather] ", where_, ": rank ", q, " sent ",
                        rows[q], " elements where ", expected, " (", sizes[q], " along dim ", dim,
                        ") were expected");
        }
      },
      [&](int peer, size_t offset, const uint8_t* from, size_t bytes) {
        const size_t block_row =
            static_cast<size_t>(sizes[static_cast<size_t>(peer)] * inner) * item;
        while (bytes > 0) {
          const size_t row = offset / block_row, within = offset % block_row;
          const size_t run = std::min(bytes, block_row - within);
          copy_bytes(base + row * out_row + start[static_cast<size_t>(peer)] + within, from, run);
          offset += run;
          from += run;
          bytes -= run;
        }
      });
}

Tensor SharedMemoryCollectives::reduce_scatter(const std::vector<Tensor>& inputs, ReduceOp reduce,
                                               const std::string& hint) {
  const Layout mine = layout_of(inputs[0]);
  post(Call::reduce_scatter, mine, static_cast<uint32_t>(reduce));
  const DType dtype = inputs[0].dtype();
  const size_t item = dtype_size(dtype);
  const int64_t count = mine.numel;
  // Each round carries `per_round` values of every rank's piece.
  const int64_t per_round = std::max<int64_t>(1, static_cast<int64_t>(kSlotBytes / item) / size_);
  Tensor result = Tensor::empty(inputs[0].shape(), dtype);
  auto* out = static_cast<uint8_t*>(result.raw_data());
  auto piece = [&](int r) {
    return static_cast<const uint8_t*>(inputs[static_cast<size_t>(r)].raw_data());
  };
  for (int64_t offset = 0; offset == 0 || offset < count; offset += per_round) {
    const int64_t n = std::min(per_round, count - offset);
    const size_t bytes = static_cast<size_t>(n) * item;
    uint8_t* set = next_set();
    uint8_t* own = slot(set, rank_);
    for (int peer = 0; peer < size_; ++peer) {
      if (peer != rank_)
        copy_bytes(own + static_cast<size_t>(peer) * bytes, piece(peer) + offset * item, bytes);
    }
    arrive_and_wait();
    if (offset == 0)
      check_agreement(Call::reduce_scatter, mine, static_cast<uint32_t>(reduce), true, hint);
    if (n == 0) continue;
    auto source = [&](int r) -> const uint8_t* {
      return r == rank_ ? piece(rank_) + offset * item
                        : slot(set, r) + static_cast<size_t>(rank_) * bytes;
    };
    uint8_t* target = out + offset * item;
    TESSERA_DISPATCH_NUMERIC(dtype, "reduce_scatter", [&] {
      reduce_values<scalar_t>(reduce, target, source(0), source(1), static_cast<size_t>(n));
      for (int peer = 2; peer < size_; ++peer) {
        reduce_values<scalar_t>(reduce, target, target, source(peer), static_cast<size_t>(n));
      }
    });
  }
  return result;
}

std::vector<Tensor> SharedMemoryCollectives::all_to_all(const std::vector<Tensor>& inputs,
                                                        const std::string& hint) {
  const Layout mine = layout_of(inputs[0]);
  post(Call::all_to_all, mine, 0);
  const auto row_bytes = static_cast<size_t>(mine.row_bytes);
  const auto peers = static_cast<size_t>(size_);
  // Each slot: the row counts this rank sends (read in the first round),
  // then one part per peer.
  const size_t header = (peers * sizeof(int64_t) + kLine - 1) / kLine * kLine;
  const size_t part = (kSlotBytes - header) / peers / kLine * kLine;
  auto sent_bytes = [&](int peer) {
    return static_cast<size_t>(inputs[static_cast<size_t>(peer)].size(0)) * row_bytes;
  };
  auto source = [&](int peer) {
    return static_cast<const uint8_t*>(inputs[static_cast<size_t>(peer)].raw_data());
  };
  auto fill = [&](uint8_t* own, size_t done) {
    for (int peer = 0; peer < size_; ++peer) {
      if (peer == rank_ || done >= sent_bytes(peer)) continue;
      copy_bytes(own + header + static_cast<size_t>(peer) * part, source(peer) + done,
                 std::min(sent_bytes(peer) - done, part));
    }
  };
  uint8_t* set = next_set();
  auto* counts = reinterpret_cast<int64_t*>(slot(set, rank_));
  for (int peer = 0; peer < size_; ++peer) counts[peer] = inputs[static_cast<size_t>(peer)].size(0);
  fill(slot(set, rank_), 0);
  arrive_and_wait();
  check_agreement(Call::all_to_all, mine, 0, false, hint);
  // What every rank sends every other: the rounds all ranks take.
  std::vector<int64_t> rows(peers);
  size_t most = 0;
  for (int from = 0; from < size_; ++from) {
    const auto* theirs = reinterpret_cast<const int64_t*>(slot(set, from));
    for (int to = 0; to < size_; ++to) {
      if (from != to) most = std::max(most, static_cast<size_t>(theirs[to]) * row_bytes);
    }
    rows[static_cast<size_t>(from)] = theirs[rank_];
  }
  const GatheredRows placed(rows);
  Tensor received = Tensor::empty(placed.shape_of(inputs[0].shape()), inputs[0].dtype());
  auto* out = static_cast<uint8_t*>(received.raw_data());
  auto out_of = [&](int from) {
    return out + static_cast<size_t>(placed.first[static_cast<size_t>(from)]) * row_bytes;
  };
  copy_bytes(out_of(rank_), source(rank_), sent_bytes(rank_));
  for (size_t done = 0;; done += part) {
    if (done > 0) {
      set = next_set();
      fill(slot(set, rank_), done);
      arrive_and_wait();
    }
    for (int from = 0; from < size_; ++from) {
      const size_t bytes = static_cast<size_t>(rows[static_cast<size_t>(from)]) * row_bytes;
      if (from == rank_ || done >= bytes) continue;
      copy_bytes(out_of(from) + done, slot(set, from) + header + static_cast<size_t>(rank_) * part,
                 std::min(bytes - done, part));
    }
    if (done + part >= most) break;
  }
  return placed.pieces(received, inputs[0].shape());
}

void SharedMemoryCollectives::broadcast(void* data, const Layout& layout, int root) {
  post(Call::broadcast, layout, static_cast<uint32_t>(root));
  const auto bytes =
      static_cast<size_t>(layout.numel) * dtype_size(static_cast<DType>(layout.dtype));
  auto* values = static_cast<uint8_t*>(data);
  // An empty tensor still takes one round, for the agreement check.
  for (size_t done = 0; done == 0 || done < bytes; done += kSlotBytes) {
    const size_t n = std::min(kSlotBytes, bytes - done);
    uint8_t* set = next_set();
    if (rank_ == root) copy_bytes(slot(set, root), values + done, n);
    arrive_and_wait();
    if (done == 0) check_agreement(Call::broadcast, layout, static_cast<uint32_t>(root), true, "");
    if (rank_ != root) copy_bytes(values + done, slot(set, root), n);
  }
}

void SharedMemoryCollectives::barrier() {
  post(Call::barrier, Layout{}, 0);
  // The call takes a round, so that a rank that leaves first posts its next
  // call to the other record while a peer may still read this one.
  (void)next_set();
  arrive_and_wait();
  check_agreement(Call::barrier, Layout{}, 0, true, "");
}

}  // namespace tessera::distributed
