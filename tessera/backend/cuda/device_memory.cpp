#include "tessera/core/device_memory.h"

#include "tessera/backend/cuda.h"
#include "tessera/backend/cuda/cuda_allocator.h"
#include "tessera/backend/cuda/runtime.h"

// The CUDA devices' memory for core (core/device_memory.h), registered when
// this library loads.
namespace tessera::cuda {

namespace {

// Throws unless `device` is a CUDA device this process can use.
void check_available(const char* op, Device device) {
  const int count = cuda::device_count();
  if (device.index >= 0 && device.index < count) return;
  std::string valid = "cpu";
  for (int index = 0; index < count; ++index) valid += str_cat(", cuda:", index);
  const std::string why =
      count == 0 ? cuda::unavailable_reason()
                 : str_cat("this process sees ", count, " CUDA device", count == 1 ? "" : "s");
  TESSERA_FAIL("[", op, "] device ", device_str(device), " is not available: ", why,
               "; valid: ", valid);
}

class CudaMemory final : public DeviceMemory {
 public:
  void* allocate(size_t nbytes, Device device) override {
    check_available("storage", device);
    return CudaAllocator::instance().allocate(nbytes, device.index);
  }

  void deallocate(void* ptr, size_t nbytes, Device device) override {
    CudaAllocator::instance().deallocate(ptr, nbytes, device.index);
  }

  void copy(void* dst, Device dst_device, const void* src, Device src_device,
            size_t nbytes) override;
};

void CudaMemory::copy(void* dst, Device dst_device, const void* src, Device src_device,
                      size_t nbytes) {
  if (nbytes == 0) return;
  const bool dst_cpu = dst_device.type == DeviceType::cpu;
  const bool src_cpu = src_device.type == DeviceType::cpu;
  if (!dst_cpu) check_available("copy", dst_device);
  if (!src_cpu) check_available("copy", src_device);
  // The legacy default stream orders the copy after earlier work on the
  // device; synchronising it makes the copy complete on return (cudaMemcpy
  // alone may return early for device-to-device and pageable host copies).
  DeviceGuard guard(dst_cpu ? src_device.index : dst_device.index);
  if (!dst_cpu && !src_cpu && dst_device.index != src_device.index) {
    TESSERA_CUDA_CHECK(cudaMemcpyPeer(dst, dst_device.index, src, src_device.index, nbytes),
                       "[copy] ", nbytes, " bytes from ", device_str(src_device), " to ",
                       device_str(dst_device));
  } else {
    const cudaMemcpyKind kind = dst_cpu   ? cudaMemcpyDeviceToHost
                                : src_cpu ? cudaMemcpyHostToDevice
                                          : cudaMemcpyDeviceToDevice;
    TESSERA_CUDA_CHECK(cudaMemcpy(dst, src, nbytes, kind), "[copy] ", nbytes, " bytes from ",
                       device_str(src_device), " to ", device_str(dst_device));
  }
  TESSERA_CUDA_CHECK(cudaStreamSynchronize(nullptr), "[copy] waiting for ", nbytes, " bytes from ",
                     device_str(src_device), " to ", device_str(dst_device));
}

// Never destroyed: tensors may outlive this library's static objects.
const bool registered = [] {
  register_device_memory(DeviceType::cuda, new CudaMemory);
  return true;
}();

}  // namespace

}  // namespace tessera::cuda
