#include "tessera/core/storage.h"

#include "tessera/core/allocator.h"
#include "tessera/core/error.h"

namespace tessera {

Storage::Storage(size_t nbytes, Device device) : nbytes_(nbytes), device_(device) {
  TESSERA_CHECK(device.type == DeviceType::cpu, "[storage] device ", device_str(device),
                " is not available in this build; valid: cpu");
  data_ = CpuAllocator::instance().allocate(nbytes);
}

Storage::~Storage() { CpuAllocator::instance().deallocate(data_, nbytes_); }

}  // namespace tessera
