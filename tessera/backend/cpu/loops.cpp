#include "tessera/backend/cpu/loops.h"

namespace tessera::cpu {

Strides broadcast_strides(const Tensor& tensor, const Shape& out_shape) {
  const int64_t lead = static_cast<int64_t>(out_shape.size()) - tensor.dim();
  Strides strides(out_shape.size(), 0);
  for (int64_t d = 0; d < tensor.dim(); ++d) {
    if (tensor.shape()[d] != 1) strides[d + lead] = tensor.strides()[d];
  }
  return strides;
}

}  // namespace tessera::cpu
