// The CUDA devices' memory (core/device_memory.h) in builds without CUDA:
// every request for a CUDA device fails, naming what is valid.
#include "tessera/core/device_memory.h"

#include "tessera/core/error.h"

namespace tessera {

namespace {

class NoCudaMemory final : public DeviceMemory {
 public:
  void* allocate(size_t, Device device) override {
    TESSERA_FAIL("[storage] device ", device_str(device),
                 " is not available: Tessera was built without CUDA; valid: cpu");
  }

  void deallocate(void*, size_t, Device) override {}

  void copy(void*, Device dst_device, const void*, Device src_device, size_t) override {
    const Device other = dst_device.type == DeviceType::cpu ? src_device : dst_device;
    TESSERA_FAIL("[copy] device ", device_str(other),
                 " is not available: Tessera was built without CUDA; valid: cpu");
  }
};

// Never destroyed: registered for the whole process.
const bool registered = [] {
  register_device_memory(DeviceType::cuda, new NoCudaMemory);
  return true;
}();

}  // namespace

}  // namespace tessera
