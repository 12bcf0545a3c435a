#pragma once

// In-place arithmetic, as libtorch's `x += y`: the result is computed out of
// place with the usual promotion and broadcasting, then written back into x
// (which may be a strided view) with copy_. PyTorch's checks apply: the
// result must broadcast to x's shape, its dtype must be castable to x's
// (no float into an integer tensor, nothing but bool into bool), a leaf that
// requires grad cannot be written with grad mode on, and a tensor saved for
// a gradient makes backward fail once it is overwritten.

#include "tessera/core/tensor.h"
#include "tessera/ops/scalar.h"

namespace tessera {

// The handle is taken by value so that views (`x.select(0, 1) += y`) can be
// written to; the returned handle is x.
Tensor operator+=(Tensor x, const Tensor& other);
Tensor operator-=(Tensor x, const Tensor& other);
Tensor operator*=(Tensor x, const Tensor& other);
Tensor operator/=(Tensor x, const Tensor& other);
Tensor operator+=(Tensor x, Scalar other);
Tensor operator-=(Tensor x, Scalar other);
Tensor operator*=(Tensor x, Scalar other);
Tensor operator/=(Tensor x, Scalar other);

}  // namespace tessera
