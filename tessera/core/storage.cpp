#include "tessera/core/storage.h"

#include "tessera/core/allocator.h"
#include "tessera/core/device_memory.h"
#include "tessera/core/error.h"
#include "tessera/core/work.h"

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

void Storage::set_pending(std::shared_ptr<Work> work) {
  pending_ = std::move(work);
}

void Storage::wait_pending() {
  if (!pending_) return;
  // Cleared only once the work is over: until then its thread may read it.
  std::shared_ptr<Work> work = pending_;
  try {
    work->wait();
  } catch (...) {
    pending_ = nullptr;
    throw;
  }
  pending_ = nullptr;
}

}  // namespace tessera
