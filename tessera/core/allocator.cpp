#include "tessera/core/allocator.h"

#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <mutex>
#include <new>
#include <thread>
#include <unordered_map>
#include <vector>

#include "tessera/core/error.h"

namespace tessera {

namespace {
constexpr size_t kAlignment = 64;
constexpr size_t kHugePage = size_t{2} << 20;

void* system_allocate(size_t nbytes) {
  size_t alignment = nbytes >= kHugePage ? kHugePage : kAlignment;
  void* ptr = std::aligned_alloc(alignment, nbytes);
  if (ptr != nullptr && nbytes >= kHugePage) madvise(ptr, nbytes, MADV_HUGEPAGE);
  return ptr;
}
}  // namespace

constexpr size_t kSmallLimit = 4096;  // classes up to here step by kAlignment

// The allocator's lock: held for a few loads and stores, so a spin on one
// atomic (and a yield when a holder was preempted) is cheaper than a mutex,
// whose unlock is a second atomic read-modify-write on every small op.
class SpinLock {
 public:
  void lock() {
    for (int spins = 0; held_.exchange(true, std::memory_order_acquire); ++spins) {
      while (held_.load(std::memory_order_relaxed)) {
        if (++spins > 64) std::this_thread::yield();
#if defined(__x86_64__) || defined(__i386__)
        __builtin_ia32_pause();
#endif
      }
    }
  }
  void unlock() {
    held_.store(false, std::memory_order_release);
  }

 private:
  std::atomic<bool> held_{false};
};

struct CpuAllocator::State {
  SpinLock mutex;
  // Free blocks per size class: the small classes indexed directly (a
  // small op's output costs no hash), the others by size.
  std::vector<void*> small_blocks[kSmallLimit / kAlignment];
  std::unordered_map<size_t, std::vector<void*>> free_blocks;
  AllocatorStats stats;

  std::vector<void*>& blocks_of(size_t size) {
    if (size <= kSmallLimit) return small_blocks[size / kAlignment - 1];
    return free_blocks[size];
  }
};

CpuAllocator& CpuAllocator::instance() {
  static CpuAllocator* allocator = new CpuAllocator();  // never destroyed: tensors may outlive main
  return *allocator;
}

CpuAllocator::~CpuAllocator() { empty_cache(); }

CpuAllocator::State& CpuAllocator::state() const {
  static State* state = new State();
  return *state;
}

size_t CpuAllocator::round_size(size_t nbytes) {
  if (nbytes == 0) nbytes = 1;
  if (nbytes <= 4096) return (nbytes + kAlignment - 1) / kAlignment * kAlignment;
  if (nbytes >= kHugePage) return (nbytes + kHugePage - 1) / kHugePage * kHugePage;
  // Four classes per power of two keeps waste under 25%.
  size_t power = size_t{1} << (63 - __builtin_clzll(nbytes - 1));
  size_t step = power / 4;
  return (nbytes + step - 1) / step * step;
}

void* CpuAllocator::allocate(size_t nbytes) {
  size_t size = round_size(nbytes);
  State& s = state();
  {
    std::lock_guard<SpinLock> lock(s.mutex);
    std::vector<void*>& blocks = s.blocks_of(size);
    if (!blocks.empty()) {
      void* ptr = blocks.back();
      blocks.pop_back();
      s.stats.cached_bytes -= static_cast<int64_t>(size);
      s.stats.allocations += 1;
      s.stats.current_bytes += static_cast<int64_t>(size);
      s.stats.peak_bytes = std::max(s.stats.peak_bytes, s.stats.current_bytes);
      return ptr;
    }
  }
  void* ptr = system_allocate(size);
  if (ptr == nullptr) {
    empty_cache();
    ptr = system_allocate(size);
  }
  TESSERA_CHECK(ptr != nullptr, "[allocator] out of memory allocating ", size, " bytes");
  std::lock_guard<SpinLock> lock(s.mutex);
  s.stats.system_allocations += 1;
  s.stats.allocations += 1;
  s.stats.current_bytes += static_cast<int64_t>(size);
  s.stats.peak_bytes = std::max(s.stats.peak_bytes, s.stats.current_bytes);
  return ptr;
}

void CpuAllocator::deallocate(void* ptr, size_t nbytes) {
  if (ptr == nullptr) return;
  size_t size = round_size(nbytes);
  State& s = state();
  std::lock_guard<SpinLock> lock(s.mutex);
  s.blocks_of(size).push_back(ptr);
  s.stats.current_bytes -= static_cast<int64_t>(size);
  s.stats.cached_bytes += static_cast<int64_t>(size);
}

AllocatorStats CpuAllocator::stats() const {
  State& s = state();
  std::lock_guard<SpinLock> lock(s.mutex);
  return s.stats;
}

void CpuAllocator::reset_peak() {
  State& s = state();
  std::lock_guard<SpinLock> lock(s.mutex);
  s.stats.peak_bytes = s.stats.current_bytes;
}

void CpuAllocator::empty_cache() {
  State& s = state();
  std::lock_guard<SpinLock> lock(s.mutex);
  auto release = [&s](size_t size, std::vector<void*>& blocks) {
    for (void* ptr : blocks) std::free(ptr);
    s.stats.cached_bytes -= static_cast<int64_t>(size * blocks.size());
    blocks.clear();
  };
  for (size_t i = 0; i < kSmallLimit / kAlignment; ++i) {
    release((i + 1) * kAlignment, s.small_blocks[i]);
  }
  for (auto& [size, blocks] : s.free_blocks) release(size, blocks);
  s.free_blocks.clear();
}

}  // namespace tessera
