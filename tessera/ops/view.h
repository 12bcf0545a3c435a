#pragma once

// View ops share storage with their input; they are also Tensor methods
// (x.reshape(...), x.transpose(0, 1), ...). Gradients flow through views.

#include "tessera/core/tensor.h"

namespace tessera {

// Shape with one optional -1 resolved against numel; throws naming `op`.
Shape infer_size(const Shape& shape, int64_t numel, const char* op);
// Strides that let `shape` view memory laid out as (old_shape, old_strides),
// or nullopt when a copy is required.
std::optional<Strides> view_strides(const Shape& old_shape, const Strides& old_strides,
                                    const Shape& shape);

// Gradient of slice: places `grad` into zeros of `input_shape` at the slice.
Tensor slice_backward(const Tensor& grad, const Shape& input_shape, int64_t dim, int64_t start,
                      int64_t end, int64_t step);

}  // namespace tessera
