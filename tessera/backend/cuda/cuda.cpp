#include "tessera/backend/cuda.h"

#include "tessera/backend/cuda/cuda_allocator.h"
#include "tessera/backend/cuda/runtime.h"

namespace tessera::cuda {

namespace {

struct Probe {
  int count = 0;
  std::string reason;  // why count is 0
};

// Asked once: the answer does not change while the process runs, and the
// first call initialises the runtime (tens of milliseconds).
const Probe& probe() {
  static const Probe result = [] {
    Probe probe;
    int count = 0;
    const cudaError_t status = cudaGetDeviceCount(&count);
    if (status != cudaSuccess) {
      (void)cudaGetLastError();
      probe.reason = str_cat("the CUDA runtime finds no usable device (cudaGetDeviceCount: ",
                             cudaGetErrorName(status), ", ", cudaGetErrorString(status), ")");
    } else if (count == 0) {
      probe.reason = "the CUDA runtime finds no device on this machine";
    } else {
      probe.count = count;
    }
    return probe;
  }();
  return result;
}

}  // namespace

bool is_built() {
  return true;
}

int device_count() {
  return probe().count;
}

bool is_available() {
  return device_count() > 0;
}

std::string unavailable_reason() {
  return probe().reason;
}

AllocatorStats memory_stats(int index) {
  return CudaAllocator::instance().stats(index);
}

void empty_cache() {
  if (is_available()) CudaAllocator::instance().empty_cache();
}

void synchronize(int index) {
  TESSERA_CHECK(index >= 0 && index < device_count(), "[synchronize] cuda:", index,
                " is not available; this process sees ", device_count(), " CUDA device(s)");
  DeviceGuard guard(index);
  TESSERA_CUDA_CHECK(cudaDeviceSynchronize(), "[synchronize] cuda:", index);
}

}  // namespace tessera::cuda
