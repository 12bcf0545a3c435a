#pragma once

// Matrix products with torch.matmul semantics.

#include "tessera/core/tensor.h"

namespace tessera {

// Matrix product: 1-D x 1-D is a dot product (0-d result); a 1-D operand is
// promoted to a row (left) or column (right) vector and the added dim is
// removed again; dims before the last two are batch dims and broadcast.
// f32/f64 go through BLAS; i64 and i32 use a plain loop.
Tensor matmul(const Tensor& a, const Tensor& b);

}  // namespace tessera
