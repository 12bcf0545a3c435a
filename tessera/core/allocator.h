#pragma once

#include <cstddef>
#include <cstdint>

namespace tessera {

struct AllocatorStats {
  int64_t current_bytes = 0;  // handed out and not yet returned
  int64_t peak_bytes = 0;     // maximum of current_bytes since the last reset
  int64_t cached_bytes = 0;   // returned blocks kept for reuse
  int64_t system_allocations = 0;  // times the allocator asked the OS for memory
  int64_t allocations = 0;         // blocks handed out, from the cache or the OS
};

// Caching CPU allocator. Blocks are 64-byte aligned and rounded to size
// classes; freed blocks are kept per class and reused, because first-touch
// page faults cost more than the work of most ops. Blocks of 2 MiB and more
// are 2 MiB aligned and asked to be backed by transparent huge pages.
class CpuAllocator {
 public:
  static CpuAllocator& instance();

  void* allocate(size_t nbytes);
  void deallocate(void* ptr, size_t nbytes);

  AllocatorStats stats() const;
  void reset_peak();
  // Returns every cached block to the OS.
  void empty_cache();
  // Size class actually reserved for a request of nbytes.
  static size_t round_size(size_t nbytes);

 private:
  CpuAllocator() = default;
  ~CpuAllocator();
  struct State;
  State& state() const;
};

}  // namespace tessera
