#include "tessera/core/storage.h"

#include "tessera/core/allocator.h"
#include "tessera/core/device_memory.h"
#include "tessera/core/error.h"

namespace tessera {

Storage::Storage(size_t nbytes, Device device) : nbytes_(nbytes), device_(device) {
  data_ = device.type == DeviceType::cpu ? CpuAllocator::instance().allocate(nbytes)
                                         : device_memory::allocate(nbytes, device);
}

Storage::~Storage() {
  if (device_.type == DeviceType::cpu) {
    CpuAllocator::instance().deallocate(data_, nbytes_);
  } else {
    device_memory::deallocate(data_, nbytes_, device_);
  }
}

}  // namespace tessera
