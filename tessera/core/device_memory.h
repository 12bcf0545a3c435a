#pragma once

#include <cstddef>

#include "tessera/core/device.h"

// How core reaches memory that is not the CPU's. Each device type's backend
// registers its DeviceMemory when its library loads (tessera/backend/cuda:
// the CUDA caching allocator and cudaMemcpy; in a build without CUDA,
// tessera/backend/no_cuda, whose allocate() explains that there is no
// CUDA), so core never names a backend. Nothing here touches the CUDA
// runtime until a CUDA device is asked for, so CPU-only programs never
// initialise it.
namespace tessera {

class DeviceMemory {
 public:
  virtual ~DeviceMemory() = default;
  // nbytes on `device`; throws "[storage] device cuda:i is not available:
  // <why>; valid: <devices>" when there is no such device.
  virtual void* allocate(size_t nbytes, Device device) = 0;
  // Returns a block from allocate() to its device's cache.
  virtual void deallocate(void* ptr, size_t nbytes, Device device) = 0;
  // Copies nbytes between this backend's devices and the CPU (either side
  // may be the CPU, not both); returns once the copy is complete.
  virtual void copy(void* dst, Device dst_device, const void* src, Device src_device,
                    size_t nbytes) = 0;
};

// Installs the memory of `type`'s devices (not the CPU's, which core owns).
// The object must outlive every tensor on those devices; a backend passes a
// static one.
void register_device_memory(DeviceType type, DeviceMemory* memory);

namespace device_memory {

// On the registered backend of device.type; throws naming the device when
// none is registered.
void* allocate(size_t nbytes, Device device);
void deallocate(void* ptr, size_t nbytes, Device device);
// Copies nbytes from src on src_device to dst on dst_device (either may be
// the CPU); returns once the copy is complete.
void copy(void* dst, Device dst_device, const void* src, Device src_device, size_t nbytes);

}  // namespace device_memory

}  // namespace tessera
