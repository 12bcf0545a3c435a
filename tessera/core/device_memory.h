#pragma once

#include <cstddef>

#include "tessera/core/device.h"

// How core reaches memory that is not the CPU's. Defined by
// tessera/backend/cuda (the CUDA caching allocator and cudaMemcpy) or, in a
// build without CUDA, by tessera/backend/no_cuda, whose allocate() explains
// that there is no CUDA. Nothing here touches the CUDA runtime until a CUDA
// device is asked for, so CPU-only programs never initialise it.
namespace tessera::device_memory {

// nbytes on `device` (a CUDA device); throws "[storage] device cuda:i is not
// available: <why>; valid: <devices>" when there is no such device.
void* allocate(size_t nbytes, Device device);
// Returns a block from allocate() to its device's cache.
void deallocate(void* ptr, size_t nbytes, Device device);
// Copies nbytes from src on src_device to dst on dst_device (either may be
// the CPU); returns once the copy is complete.
void copy(void* dst, Device dst_device, const void* src, Device src_device, size_t nbytes);

}  // namespace tessera::device_memory
