#pragma once

// The dataset interface: a random-access collection of (data, target)
// examples. DataLoader batches any Dataset; datasets backed by one big
// tensor override get_batch with a single gather.

#include <cstdint>
#include <vector>

#include "tessera/core/tensor.h"

namespace tessera::data {

// One example, or a batch of them (then both tensors have a leading batch dim).
struct Example {
  Tensor data;
  Tensor target;
};

class Dataset {
 public:
  virtual ~Dataset() = default;

  // Number of examples.
  virtual int64_t size() const = 0;
  // Example `index` in [0, size()); throws naming the index and the size otherwise.
  virtual Example get(int64_t index) const = 0;
  // Examples at `indices` stacked along a new leading dim. The default stacks
  // get(i); it must be safe to call from several threads at once.
  virtual Example get_batch(const std::vector<int64_t>& indices) const;

 protected:
  // Throws "[dataset_name] index ... out of range" unless 0 <= index < size().
  void check_index(int64_t index, const char* dataset_name) const;
  // Throws unless `indices` is non-empty and every index is in range.
  void check_indices(const std::vector<int64_t>& indices, const char* dataset_name) const;
};

}  // namespace tessera::data
