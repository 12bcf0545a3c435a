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
#include <cerrno>
#include <climits>
#include <cstring>
#include <ctime>

#include "tessera/core/error.h"
#include "tessera/distributed/gloo/ring_reduce_scatter.h"

namespace tessera::distributed {
namespace {

constexpr uint32_t kMagic = 0x54534d52;  // "TSMR"
constexpr size_t kLine = 64;             // one cache line per rank's control words
constexpr size_t kPage = 4096;

size_t data_offset(int size) {
  const size_t control = kLine * (static_cast<size_t>(size) + 1);
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

void futex_wake_all(uint32_t* word) { syscall(SYS_futex, word, FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0); }

std::string errno_text(int code) { return std::strerror(code); }

// dtype and op of one call in one word, for comparing ranks' calls.
uint32_t kind_of(DType dtype, ReduceOp op) {
  return static_cast<uint32_t>(dtype) | static_cast<uint32_t>(op) << 8;
}

}  // namespace

std::string SharedMemoryReducer::fresh_name() {
  static std::atomic<int> counter{0};
  return str_cat("/tessera-", getpid(), "-", counter.fetch_add(1));
}

SharedMemoryReducer::SharedMemoryReducer(std::string name, bool create, int rank, int size,
                                         std::chrono::milliseconds timeout)
    : name_(std::move(name)), owner_(create), rank_(rank), size_(size), timeout_(timeout) {
  bytes_ = segment_bytes(size_);
  const int fd = create ? shm_open(name_.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600)
                        : shm_open(name_.c_str(), O_RDWR, 0);
  TESSERA_CHECK(fd >= 0, "[shared memory] cannot ", create ? "create" : "open", " segment ",
                name_, ": ", errno_text(errno));
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
    const bool valid = std::atomic_ref<uint32_t>(header[0]).load(std::memory_order_acquire) ==
                           kMagic &&
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

uint32_t* SharedMemoryReducer::epoch_word(int rank) const {
  return reinterpret_cast<uint32_t*>(base_ + kLine * (static_cast<size_t>(rank) + 1));
}

int32_t* SharedMemoryReducer::pid_word(int rank) const {
  return reinterpret_cast<int32_t*>(base_ + kLine * (static_cast<size_t>(rank) + 1) + 4);
}

int64_t* SharedMemoryReducer::count_word(int rank) const {
  return reinterpret_cast<int64_t*>(base_ + kLine * (static_cast<size_t>(rank) + 1) + 8);
}

uint32_t* SharedMemoryReducer::kind_word(int rank) const {
  return reinterpret_cast<uint32_t*>(base_ + kLine * (static_cast<size_t>(rank) + 1) + 16);
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
      TESSERA_FAIL("timed out after ", timeout_.count(), " ms waiting for rank ", peer,
                   " in the shared-memory all-reduce");
    }
    const int32_t pid = std::atomic_ref<int32_t>(*pid_word(peer)).load(std::memory_order_acquire);
    if (attempt % 64 == 0 && pid > 0 && kill(pid, 0) != 0 && errno == ESRCH) {
      broken_ = true;
      TESSERA_FAIL("lost rank ", peer, ": its process ", pid,
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

void SharedMemoryReducer::check_agreement(int64_t count, DType dtype, ReduceOp op) {
  for (int peer = 0; peer < size_; ++peer) {
    const int64_t their_count = *count_word(peer);
    const uint32_t their_kind = *kind_word(peer);
    if (their_count == count && their_kind == kind_of(dtype, op)) continue;
    broken_ = true;
    TESSERA_FAIL("rank ", peer, " reduces ", their_count, " values of ",
                 dtype_name(static_cast<DType>(their_kind & 0xff)), " by ",
                 reduce_op_name(static_cast<ReduceOp>(their_kind >> 8)), " but rank ", rank_,
                 " reduces ", count, " values of ", dtype_name(dtype), " by ", reduce_op_name(op),
                 "; every rank must pass the same shape, dtype and op");
  }
}

void SharedMemoryReducer::all_reduce(void* data, int64_t count, DType dtype, ReduceOp op) {
  TESSERA_CHECK(!broken_, "an earlier shared-memory all-reduce failed; the group is unusable");
  // Posted before the first barrier and compared after it: ranks that
  // disagree all stop there, before any value is mixed.
  *count_word(rank_) = count;
  *kind_word(rank_) = kind_of(dtype, op);
  const size_t item = dtype_size(dtype);
  const int64_t per_round = static_cast<int64_t>(kSlotBytes / item);
  auto* values = static_cast<uint8_t*>(data);
  for (int64_t offset = 0; offset < count; offset += per_round) {
    const int64_t n = std::min(per_round, count - offset);
    uint8_t* set = data_ + (rounds_++ % 2) * (static_cast<size_t>(size_) + 1) * kSlotBytes;
    uint8_t* result = set + static_cast<size_t>(size_) * kSlotBytes;
    std::memcpy(set + static_cast<size_t>(rank_) * kSlotBytes, values + offset * item,
                static_cast<size_t>(n) * item);
    barrier();
    if (offset == 0) check_agreement(count, dtype, op);
    // Rank r reduces slice r (the first n % size slices one value longer).
    const int64_t base = n / size_, extra = n % size_;
    const int64_t length = base + (rank_ < extra ? 1 : 0);
    if (length > 0) {
      const size_t start = static_cast<size_t>(rank_ * base + std::min<int64_t>(rank_, extra)) * item;
      uint8_t* out = result + start;
      TESSERA_DISPATCH_NUMERIC(dtype, "all_reduce", [&] {
        reduce_values<scalar_t>(op, out, set + start, set + kSlotBytes + start,
                                static_cast<size_t>(length));
        for (int peer = 2; peer < size_; ++peer) {
          reduce_values<scalar_t>(op, out, out, set + static_cast<size_t>(peer) * kSlotBytes + start,
                                  static_cast<size_t>(length));
        }
      });
    }
    barrier();
    std::memcpy(values + offset * item, result, static_cast<size_t>(n) * item);
  }
}

}  // namespace tessera::distributed
