#pragma once

#include <string>

#include "tessera/core/allocator.h"

// CUDA devices as Tessera sees them. Works in every build: without CUDA
// support, or without a driver or a GPU, device_count() is 0. Tensors move
// with Tensor::to(Device), .cuda() and .cpu(); there are no CUDA kernels
// yet, so ops on CUDA tensors raise, and only copies and the NCCL
// collectives run on the GPU.
namespace tessera::cuda {

// True when Tessera was built with CUDA (TESSERA_WITH_CUDA, CUDA and NCCL found).
bool is_built();
// CUDA devices this process can use; 0 without CUDA support, driver or
// device. Asks the driver once (the first call initialises the runtime).
int device_count();
// device_count() > 0.
bool is_available();
// Why no CUDA device is available ("built without CUDA", the runtime's
// error, ...); empty when one is.
std::string unavailable_reason();
// The caching allocator's counters for cuda:index (zeros when it was never
// used or there is no CUDA).
AllocatorStats memory_stats(int index = 0);
// Returns every cached block of every device to the driver.
void empty_cache();
// Waits for all work on cuda:index to finish.
void synchronize(int index = 0);

}  // namespace tessera::cuda
