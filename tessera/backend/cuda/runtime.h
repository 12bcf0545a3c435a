#pragma once

// Helpers over the CUDA runtime for the files that call it (backend/cuda and
// distributed/nccl); cuda_runtime.h stays out of Tessera's public headers.

#include <cuda_runtime.h>

#include "tessera/core/error.h"

// Runs a CUDA runtime call; on failure clears the runtime's error state and
// throws tessera::Error with the message pieces, then the CUDA error.
#define TESSERA_CUDA_CHECK(call, ...)                                              \
  do {                                                                             \
    const cudaError_t tessera_cuda_status = (call);                                \
    if (tessera_cuda_status != cudaSuccess) {                                      \
      (void)cudaGetLastError();                                                    \
      TESSERA_FAIL(__VA_ARGS__, ": ", cudaGetErrorName(tessera_cuda_status), " (", \
                   cudaGetErrorString(tessera_cuda_status), ")");                  \
    }                                                                              \
  } while (0)

namespace tessera::cuda {

// Makes cuda:index the calling thread's current device while it lives, then
// restores the previous one, so callers never leave the device changed.
class DeviceGuard {
 public:
  explicit DeviceGuard(int index) {
    TESSERA_CUDA_CHECK(cudaGetDevice(&previous_), "[cuda] cudaGetDevice failed");
    if (previous_ != index) {
      TESSERA_CUDA_CHECK(cudaSetDevice(index), "[cuda] cannot make cuda:", index, " current");
    }
    index_ = index;
  }
  ~DeviceGuard() {
    if (previous_ != index_) (void)cudaSetDevice(previous_);
  }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_ = 0;
  int index_ = 0;
};

}  // namespace tessera::cuda
