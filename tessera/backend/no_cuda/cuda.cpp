// tessera/backend/cuda.h for builds without CUDA: no devices, nothing cached.
#include "tessera/backend/cuda.h"

namespace tessera::cuda {

bool is_built() {
  return false;
}

int device_count() {
  return 0;
}

bool is_available() {
  return false;
}

std::string unavailable_reason() {
  return "Tessera was built without CUDA (configure with the CUDA toolkit and NCCL installed "
         "and -DTESSERA_WITH_CUDA=ON)";
}

AllocatorStats memory_stats(int) {
  return {};
}

void empty_cache() {}

void synchronize(int) {}

}  // namespace tessera::cuda
