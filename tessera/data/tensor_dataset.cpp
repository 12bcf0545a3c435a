#include "tessera/data/tensor_dataset.h"

#include <cstring>

namespace tessera::data {

namespace {

// Copies rows `indices` of a contiguous tensor into a new [B, ...] tensor.
Tensor gather_rows(const Tensor& source, const std::vector<int64_t>& indices) {
  Shape shape = source.shape();
  shape[0] = static_cast<int64_t>(indices.size());
  Tensor out = Tensor::empty(shape, source.dtype());
  size_t row_bytes = dtype_size(source.dtype());
  for (size_t d = 1; d < shape.size(); ++d) row_bytes *= static_cast<size_t>(shape[d]);
  const auto* src = static_cast<const uint8_t*>(source.raw_data());
  auto* dst = static_cast<uint8_t*>(out.raw_data());
  for (size_t b = 0; b < indices.size(); ++b) {
    std::memcpy(dst + b * row_bytes, src + static_cast<size_t>(indices[b]) * row_bytes, row_bytes);
  }
  return out;
}

}  // namespace

TensorDataset::TensorDataset(Tensor data, Tensor targets) {
  TESSERA_CHECK(data.defined() && targets.defined(),
                "[TensorDataset] data and targets must both be defined tensors");
  TESSERA_CHECK(data.dim() >= 1 && targets.dim() >= 1,
                "[TensorDataset] data and targets need a leading example dim; got shapes ",
                shape_str(data.shape()), " and ", shape_str(targets.shape()));
  TESSERA_CHECK(data.size(0) == targets.size(0),
                "[TensorDataset] data and targets must hold the same number of examples "
                "(size of dim 0); got shapes ",
                shape_str(data.shape()), " and ", shape_str(targets.shape()));
  TESSERA_CHECK(data.device().type == DeviceType::cpu && targets.device().type == DeviceType::cpu,
                "[TensorDataset] data and targets must be CPU tensors, got ",
                device_str(data.device()), " and ", device_str(targets.device()),
                "; move batches to the GPU after loading them");
  // Examples carry no autograd history, and get_batch copies whole rows.
  data_ = data.detach().contiguous();
  targets_ = targets.detach().contiguous();
}

int64_t TensorDataset::size() const {
  return data_.size(0);
}

Example TensorDataset::get(int64_t index) const {
  check_index(index, "TensorDataset");
  return {data_.select(0, index).clone(), targets_.select(0, index).clone()};
}

Example TensorDataset::get_batch(const std::vector<int64_t>& indices) const {
  check_indices(indices, "TensorDataset");
  return {gather_rows(data_, indices), gather_rows(targets_, indices)};
}

}  // namespace tessera::data
