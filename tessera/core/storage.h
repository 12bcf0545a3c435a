#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "tessera/core/device.h"

namespace tessera {

class Work;  // core/work.h

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

  // Work that still writes this memory (an asynchronous collective). The
  // dispatcher waits for it before a kernel reads or writes the memory, as
  // a CUDA stream waits for an event. Set before the work can start, and
  // waited on, by the thread that issued it.
  void set_pending(std::shared_ptr<Work> work);
  bool has_pending() const { return pending_ != nullptr; }
  const std::shared_ptr<Work>& pending() const { return pending_; }
  // Waits for the pending work, if any, and forgets it; rethrows its error.
  void wait_pending();

 private:
  std::atomic<uint64_t> version_{0};
  std::shared_ptr<Work> pending_;
  void* data_ = nullptr;
  size_t nbytes_ = 0;
  Device device_;
};

}  // namespace tessera
