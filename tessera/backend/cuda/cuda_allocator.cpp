#include "tessera/backend/cuda/cuda_allocator.h"

#include <algorithm>
#include <map>
#include <mutex>
#include <utility>
#include <vector>

#include "tessera/backend/cuda/runtime.h"

namespace tessera::cuda {

namespace {
constexpr size_t kSmallStep = 512;
constexpr size_t kSmallLimit = size_t{1} << 20;
}  // namespace

struct CudaAllocator::State {
  mutable std::mutex mutex;
  std::map<std::pair<int, size_t>, std::vector<void*>> free_blocks;  // (device, class)
  std::map<int, AllocatorStats> stats;
};

CudaAllocator& CudaAllocator::instance() {
  // Never destroyed: tensors may outlive main, and cudaFree after the
  // runtime has shut down fails.
  static CudaAllocator* allocator = new CudaAllocator();
  return *allocator;
}

CudaAllocator::State& CudaAllocator::state() const {
  static State* state = new State();
  return *state;
}

size_t CudaAllocator::round_size(size_t nbytes) {
  if (nbytes == 0) nbytes = 1;
  if (nbytes <= kSmallLimit) return (nbytes + kSmallStep - 1) / kSmallStep * kSmallStep;
  size_t power = size_t{1} << (63 - __builtin_clzll(nbytes - 1));
  size_t step = power / 4;
  return (nbytes + step - 1) / step * step;
}

void* CudaAllocator::allocate(size_t nbytes, int device) {
  const size_t size = round_size(nbytes);
  State& s = state();
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    auto it = s.free_blocks.find({device, size});
    if (it != s.free_blocks.end() && !it->second.empty()) {
      void* ptr = it->second.back();
      it->second.pop_back();
      AllocatorStats& stats = s.stats[device];
      stats.cached_bytes -= static_cast<int64_t>(size);
      stats.allocations += 1;
      stats.current_bytes += static_cast<int64_t>(size);
      stats.peak_bytes = std::max(stats.peak_bytes, stats.current_bytes);
      return ptr;
    }
  }
  void* ptr = nullptr;
  {
    DeviceGuard guard(device);
    cudaError_t status = cudaMalloc(&ptr, size);
    if (status == cudaErrorMemoryAllocation) {
      (void)cudaGetLastError();
      release_cached(device);
      status = cudaMalloc(&ptr, size);
    }
    if (status != cudaSuccess) {
      (void)cudaGetLastError();
      int64_t in_use = 0;
      {
        std::lock_guard<std::mutex> lock(s.mutex);
        in_use = s.stats[device].current_bytes;
      }
      TESSERA_FAIL("[storage] cannot allocate ", size, " bytes on cuda:", device, " (", in_use,
                   " bytes held by tensors; the cache was emptied first): ",
                   cudaGetErrorName(status), " (", cudaGetErrorString(status), ")");
    }
  }
  std::lock_guard<std::mutex> lock(s.mutex);
  AllocatorStats& stats = s.stats[device];
  stats.system_allocations += 1;
  stats.allocations += 1;
  stats.current_bytes += static_cast<int64_t>(size);
  stats.peak_bytes = std::max(stats.peak_bytes, stats.current_bytes);
  return ptr;
}

void CudaAllocator::deallocate(void* ptr, size_t nbytes, int device) {
  if (ptr == nullptr) return;
  const size_t size = round_size(nbytes);
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  s.free_blocks[{device, size}].push_back(ptr);
  AllocatorStats& stats = s.stats[device];
  stats.current_bytes -= static_cast<int64_t>(size);
  stats.cached_bytes += static_cast<int64_t>(size);
}

AllocatorStats CudaAllocator::stats(int device) const {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  auto it = s.stats.find(device);
  return it == s.stats.end() ? AllocatorStats{} : it->second;
}

void CudaAllocator::empty_cache() {
  release_cached(-1);
}

void CudaAllocator::release_cached(int device) {
  State& s = state();
  std::vector<std::pair<int, void*>> blocks;
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    for (auto it = s.free_blocks.begin(); it != s.free_blocks.end();) {
      const auto [block_device, size] = it->first;
      if (device >= 0 && block_device != device) {
        ++it;
        continue;
      }
      for (void* ptr : it->second) blocks.emplace_back(block_device, ptr);
      s.stats[block_device].cached_bytes -= static_cast<int64_t>(size * it->second.size());
      it = s.free_blocks.erase(it);
    }
  }
  for (const auto& [block_device, ptr] : blocks) {
    DeviceGuard guard(block_device);
    TESSERA_CUDA_CHECK(cudaFree(ptr), "[empty_cache] cudaFree on cuda:", block_device, " failed");
  }
}

}  // namespace tessera::cuda
