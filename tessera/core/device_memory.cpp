#include "tessera/core/device_memory.h"

#include <atomic>
#include <cstring>

#include "tessera/core/error.h"

namespace tessera {

namespace {

std::atomic<DeviceMemory*> registered[kNumDeviceTypes] = {};

DeviceMemory& memory_of(const char* op, Device device) {
  TESSERA_CHECK(device.type != DeviceType::meta, "[", op, "] a meta tensor has no memory");
  DeviceMemory* memory = registered[static_cast<int>(device.type)].load(std::memory_order_acquire);
  TESSERA_CHECK(memory != nullptr, "[", op, "] device ", device_str(device),
                " is not available: no backend for it is loaded; valid: cpu");
  return *memory;
}

}  // namespace

void register_device_memory(DeviceType type, DeviceMemory* memory) {
  TESSERA_CHECK(type == DeviceType::cuda, "[register_device_memory] ", device_str(Device{type, 0}),
                " memory is core's own (cpu) or does not exist (meta)");
  registered[static_cast<int>(type)].store(memory, std::memory_order_release);
}

namespace device_memory {

void* allocate(size_t nbytes, Device device) {
  return memory_of("storage", device).allocate(nbytes, device);
}

void deallocate(void* ptr, size_t nbytes, Device device) {
  memory_of("storage", device).deallocate(ptr, nbytes, device);
}

void copy(void* dst, Device dst_device, const void* src, Device src_device, size_t nbytes) {
  if (dst_device.type == DeviceType::cpu && src_device.type == DeviceType::cpu) {
    if (nbytes > 0) std::memcpy(dst, src, nbytes);
    return;
  }
  const Device other = dst_device.type == DeviceType::cpu ? src_device : dst_device;
  memory_of("copy", other).copy(dst, dst_device, src, src_device, nbytes);
}

}  // namespace device_memory

}  // namespace tessera
