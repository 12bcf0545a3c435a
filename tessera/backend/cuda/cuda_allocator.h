#pragma once

#include <cstddef>

#include "tessera/core/allocator.h"

namespace tessera::cuda {

// Caching allocator for CUDA device memory, like CpuAllocator: blocks are
// rounded to size classes, and a freed block is kept per (device, class) and
// handed out again, because cudaMalloc and cudaFree synchronise the device.
// A freed block is reusable at once: every CUDA operation Tessera issues
// (copies, collectives) has finished when the call that issued it returns.
class CudaAllocator {
 public:
  static CudaAllocator& instance();

  // A block of at least nbytes on cuda:device; empties the cache and retries
  // once when the device is out of memory, then throws.
  void* allocate(size_t nbytes, int device);
  // Keeps the block for reuse by a later allocate() of the same class.
  void deallocate(void* ptr, size_t nbytes, int device);

  // Counters of cuda:device (zeros for a device never used).
  AllocatorStats stats(int device) const;
  // Returns every cached block of every device to the driver.
  void empty_cache();
  // Size class reserved for a request of nbytes: multiples of 512 bytes up
  // to 1 MiB, then four classes per power of two.
  static size_t round_size(size_t nbytes);

 private:
  CudaAllocator() = default;
  struct State;
  State& state() const;
  // Frees the cached blocks of one device, or of all when device < 0.
  void release_cached(int device);
};

}  // namespace tessera::cuda
