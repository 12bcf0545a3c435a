// tessera/core/device_memory.h for builds without CUDA: every request for a
// CUDA device fails, naming what is valid.
#include "tessera/core/device_memory.h"

#include <cstring>

#include "tessera/core/error.h"

namespace tessera::device_memory {

void* allocate(size_t, Device device) {
  TESSERA_FAIL("[storage] device ", device_str(device),
               " is not available: Tessera was built without CUDA; valid: cpu");
}

void deallocate(void*, size_t, Device) {}

void copy(void* dst, Device dst_device, const void* src, Device src_device, size_t nbytes) {
  const Device other = dst_device.type == DeviceType::cpu ? src_device : dst_device;
  TESSERA_CHECK(other.type == DeviceType::cpu, "[copy] device ", device_str(other),
                " is not available: Tessera was built without CUDA; valid: cpu");
  if (nbytes > 0) std::memcpy(dst, src, nbytes);
}

}  // namespace tessera::device_memory
