#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "tessera/core/device.h"

namespace tessera {

// A block of device memory shared by a tensor and all its views. Memory
// comes from (and returns to) the device's caching allocator.
class Storage {
 public:
  Storage(size_t nbytes, Device device);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  void* data() const { return data_; }
  size_t nbytes() const { return nbytes_; }
  Device device() const { return device_; }

  // Counts in-place writes to this memory, through any tensor that shares it
  // (views and detached aliases included). Autograd saves it with each
  // tensor a gradient will read and compares it in backward, so a gradient
  // never reads values that changed after the forward pass used them.
  uint64_t version() const { return version_.load(std::memory_order_relaxed); }
  void bump_version() { version_.fetch_add(1, std::memory_order_relaxed); }

 private:
  std::atomic<uint64_t> version_{0};
  void* data_ = nullptr;
  size_t nbytes_ = 0;
  Device device_;
};

}  // namespace tessera
