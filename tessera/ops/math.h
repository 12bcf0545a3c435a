#pragma once

// Elementwise math beyond the basic arithmetic of elementwise.h, as
// torch.<name>: rounding, logarithms and exponentials in other bases,
// remainders, floating-point classification, interpolation. Broadcasting and
// type promotion follow PyTorch (see result_type).

#include <optional>

#include "tessera/core/tensor.h"
#include "tessera/ops/scalar.h"

namespace tessera {

// Unary functions of floating values; integer and bool inputs are promoted
// to f32, as in PyTorch.
Tensor erfc(const Tensor& x);
Tensor erfinv(const Tensor& x);
Tensor log1p(const Tensor& x);
Tensor expm1(const Tensor& x);
Tensor log2(const Tensor& x);
Tensor log10(const Tensor& x);
Tensor exp2(const Tensor& x);
Tensor reciprocal(const Tensor& x);

// Rounding: integer inputs are returned unchanged (same dtype); the gradient
// is zero. round rounds half to even; with `decimals`, to that many decimal
// places (negative: to tens, hundreds, ...), floating inputs only.
Tensor floor(const Tensor& x);
Tensor ceil(const Tensor& x);
Tensor trunc(const Tensor& x);
Tensor round(const Tensor& x, int64_t decimals = 0);
// x - trunc(x); floating inputs only.
Tensor frac(const Tensor& x);
// -1, 0 or 1 in x's dtype (bool stays bool; NaN gives 0, as PyTorch 1.13).
Tensor sign(const Tensor& x);

// NaN, +inf and -inf replaced by nan (default 0), posinf and neginf
// (defaults: the largest and lowest finite value of x's dtype).
Tensor nan_to_num(const Tensor& x, double nan = 0.0, std::optional<double> posinf = std::nullopt,
                  std::optional<double> neginf = std::nullopt);

// Floating-point classification: bool tensors, no gradient.
Tensor isnan(const Tensor& x);
Tensor isinf(const Tensor& x);
Tensor isfinite(const Tensor& x);

// Remainders of a / b: remainder has the sign of b (Python's %), fmod the
// sign of a (C's fmod). Integer division by zero raises.
Tensor remainder(const Tensor& a, const Tensor& b);
Tensor remainder(const Tensor& a, Scalar b);
Tensor remainder(Scalar a, const Tensor& b);
Tensor fmod(const Tensor& a, const Tensor& b);
Tensor fmod(const Tensor& a, Scalar b);
// atan2(a, b): the angle of the point (b, a), in (-pi, pi].
Tensor atan2(const Tensor& a, const Tensor& b);
// sqrt(a^2 + b^2) without overflow; floating inputs only.
Tensor hypot(const Tensor& a, const Tensor& b);
// log(exp(a) + exp(b)) and log2(2^a + 2^b), stable; floating inputs only.
Tensor logaddexp(const Tensor& a, const Tensor& b);
Tensor logaddexp2(const Tensor& a, const Tensor& b);
// Nonzero-ness exclusive or: a bool tensor.
Tensor logical_xor(const Tensor& a, const Tensor& b);

// start + weight * (end - start); start, end (and a tensor weight) must share
// one floating dtype, as in PyTorch.
Tensor lerp(const Tensor& start, const Tensor& end, Scalar weight);
Tensor lerp(const Tensor& start, const Tensor& end, const Tensor& weight);
// input + value * tensor1 * tensor2, and input + value * tensor1 / tensor2
// (addcdiv refuses integer tensor1 and tensor2, as PyTorch does).
Tensor addcmul(const Tensor& input, const Tensor& tensor1, const Tensor& tensor2,
               Scalar value = 1);
Tensor addcdiv(const Tensor& input, const Tensor& tensor1, const Tensor& tensor2,
               Scalar value = 1);

}  // namespace tessera
