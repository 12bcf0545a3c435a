#pragma once

#include <cstddef>
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

 private:
  void* data_ = nullptr;
  size_t nbytes_ = 0;
  Device device_;
};

}  // namespace tessera
