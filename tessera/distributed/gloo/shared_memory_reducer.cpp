#include "tessera/distributed/gloo/shared_memory_reducer.h"

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

#include "tessera/core/error.h"
#include "tessera/distributed/gloo/ring_reduce_scatter.h"
#include "tessera/distributed/rendezvous.h"

namespace tessera::distributed {
namespace {

constexpr uint32_t kMagic = 0x54534d52;  // "TSMR"
constexpr size_t kLine = 64;
// Per rank: epoch and process id (line 0, the futex word alone in it with
// little else), the call's reduce op and layout (lines 1-2).
constexpr size_t kControlBytes = 4 * kLine;
constexpr size_t kLayoutOffset = kLine;
constexpr size_t kPage = 4096;

size_t data_offset(int size) {
  const size_t control = kLine + kControlBytes * static_cast<size_t>(size);
  return (control + kPage - 1) / kPage * kPage;
}

// Two alternating sets of (one slot per rank + the shared result).
size_t segment_bytes(int size) {
  return data_offset(size) + 2 * (static_cast<size_t>(size) + 1) * SharedMemoryReducer::kSlotBytes;
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

std::string SharedMemoryReducer::fresh_name() {
  static std::atomic<int> counter{0};
  // Named after the job, so the launcher can unlink a segment whose ranks
  // were killed before they could (tessera-run removes tessera-<job>-*).
  std::string job;
  for (char c : job_id_from_env())
    if (std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.') job += c;
  return str_cat("/tessera-", job.empty() ? "" : job + "-", getpid(), "-", counter.fetch_add(1));
}

SharedMemoryReducer::SharedMemoryReducer(std::string name, bool create, int rank, int size,
                                         std::chrono::milliseconds timeout, std::string where)
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

SharedMemoryReducer::~SharedMemoryReducer() {
  if (base_ != nullptr) munmap(base_, bytes_);
  if (owner_) unlink();
}

void SharedMemoryReducer::unlink() {
  if (!owner_) return;
  shm_unlink(name_.c_str());
  owner_ = false;
}

uint8_t* SharedMemoryReducer::control(int rank) const {
  return base_ + kLine + kControlBytes * static_cast<size_t>(rank);
}

uint32_t* SharedMemoryReducer::epoch_word(int rank) const {
  return reinterpret_cast<uint32_t*>(control(rank));
}

int32_t* SharedMemoryReducer::pid_word(int rank) const {
  return reinterpret_cast<int32_t*>(control(rank) + 4);
}

uint32_t* SharedMemoryReducer::op_word(int rank) const {
  return reinterpret_cast<uint32_t*>(control(rank) + 8);
}

int64_t* SharedMemoryReducer::layout_words(int rank) const {
  return reinterpret_cast<int64_t*>(control(rank) + kLayoutOffset);
}

void SharedMemoryReducer::wait_for(int peer, uint32_t target) {
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
      TESSERA_FAIL("[all_reduce] ", where_, " timed out after ", timeout_.count(),
                   " ms waiting for rank ", peer, " in the shared-memory all-reduce");
    }
    const int32_t pid = std::atomic_ref<int32_t>(*pid_word(peer)).load(std::memory_order_acquire);
    if (attempt % 64 == 0 && pid > 0 && kill(pid, 0) != 0 && errno == ESRCH) {
      broken_ = true;
      TESSERA_FAIL("[all_reduce] ", where_, " lost rank ", peer, ": its process ", pid,
                   " exited during the shared-memory all-reduce");
    }
    futex_wait(word, seen, std::chrono::microseconds(2000));
  }
}

void SharedMemoryReducer::barrier() {
  ++epoch_;
  uint32_t* mine = epoch_word(rank_);
  std::atomic_ref<uint32_t>(*mine).store(epoch_, std::memory_order_release);
  futex_wake_all(mine);
  for (int peer = 0; peer < size_; ++peer) {
    if (peer != rank_) wait_for(peer, epoch_);
  }
}

void SharedMemoryReducer::check_agreement(const Layout& mine, ReduceOp op) {
  for (int peer = 0; peer < size_; ++peer) {
    if (peer == rank_) continue;
    check_compatible("all_reduce", mine, rank_, Layout::decode(layout_words(peer)), peer, true,
                     where_);
    const auto their_op = static_cast<ReduceOp>(*op_word(peer));
    TESSERA_CHECK(their_op == op, "[all_reduce] ", where_, " reduces by ", reduce_op_name(op),
                  " but rank ", peer, " by ", reduce_op_name(their_op),
                  "; every rank must pass the same op");
  }
}

void SharedMemoryReducer::all_reduce(void* data, const Layout& layout, ReduceOp op) {
  TESSERA_CHECK(!broken_, "[all_reduce] ", where_,
                ": an earlier shared-memory all-reduce failed; the group is unusable");
  // Posted before the first barrier and compared after it: ranks that
  // disagree all stop there, before any value is mixed, and stay in step.
  const std::vector<int64_t> record = layout.encode();
  std::memcpy(layout_words(rank_), record.data(), record.size() * sizeof(int64_t));
  *op_word(rank_) = static_cast<uint32_t>(op);
  const DType dtype = static_cast<DType>(layout.dtype);
  const int64_t count = layout.numel;
  const size_t item = dtype_size(dtype);
  const int64_t per_round = static_cast<int64_t>(kSlotBytes / item);
  auto* values = static_cast<uint8_t*>(data);
  // An empty tensor still takes one round, for the agreement check.
  for (int64_t offset = 0; offset == 0 || offset < count; offset += per_round) {
    const int64_t n = std::min(per_round, count - offset);
    uint8_t* set = data_ + (rounds_++ % 2) * (static_cast<size_t>(size_) + 1) * kSlotBytes;
    uint8_t* result = set + static_cast<size_t>(size_) * kSlotBytes;
    uint8_t* chunk = values + offset * item;
    // Rank r reduces slice r (the first n % size slices one value longer).
    const int64_t base = n / size_, extra = n % size_;
    auto slice_start = [&](int r) {
      return static_cast<size_t>(r * base + std::min<int64_t>(r, extra)) * item;
    };
    const size_t mine_start = slice_start(rank_), mine_end = slice_start(rank_ + 1);
    // The peers read only the slices they reduce; this rank reads its own
    // slice from its own memory.
    uint8_t* slot = set + static_cast<size_t>(rank_) * kSlotBytes;
    copy_bytes(slot, chunk, mine_start);
    copy_bytes(slot + mine_end, chunk + mine_end, static_cast<size_t>(n) * item - mine_end);
    barrier();
    if (offset == 0) check_agreement(layout, op);
    if (mine_end > mine_start) {
      const size_t length = (mine_end - mine_start) / item;
      auto source = [&](int r) -> const uint8_t* {
        return (r == rank_ ? chunk : set + static_cast<size_t>(r) * kSlotBytes) + mine_start;
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
    barrier();
    copy_bytes(chunk, result, mine_start);
    copy_bytes(chunk + mine_end, result + mine_end, static_cast<size_t>(n) * item - mine_end);
  }
}

}  // namespace tessera::distributed
