#pragma once

#include "tessera/data/dataset.h"

namespace tessera::data {

// Examples are the slices data[i] and targets[i] along the first dim (like
// torch.utils.data.TensorDataset with two tensors).
class TensorDataset : public Dataset {
 public:
  // data and targets need at least one dim and the same size in dim 0.
  TensorDataset(Tensor data, Tensor targets);

  // data.size(0).
  int64_t size() const override;
  // Copies of data[index] and targets[index].
  Example get(int64_t index) const override;
  // Rows gathered with one memcpy each into [B, ...] tensors.
  Example get_batch(const std::vector<int64_t>& indices) const override;

  // The whole data tensor (contiguous).
  const Tensor& data() const { return data_; }
  // The whole targets tensor (contiguous).
  const Tensor& targets() const { return targets_; }

 private:
  Tensor data_;
  Tensor targets_;
};

}  // namespace tessera::data
