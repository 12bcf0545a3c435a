#pragma once

// Elementwise ops: unary math, binary arithmetic with NumPy broadcasting and
// PyTorch type promotion, comparisons, selection and casts.

#include "tessera/core/tensor.h"
#include "tessera/ops/scalar.h"

namespace tessera {

// Unary math; integer inputs to floating functions are promoted to f32.
Tensor neg(const Tensor& x);
Tensor abs(const Tensor& x);
Tensor exp(const Tensor& x);
Tensor log(const Tensor& x);
Tensor sqrt(const Tensor& x);
Tensor rsqrt(const Tensor& x);
Tensor sin(const Tensor& x);
Tensor cos(const Tensor& x);
Tensor tanh(const Tensor& x);
Tensor sigmoid(const Tensor& x);
Tensor relu(const Tensor& x);
// ReLU's backward: grad where `input` is positive, else 0. `input` may be
// ReLU's input or its output: both are positive at the same places.
Tensor relu_backward(const Tensor& grad, const Tensor& input);
Tensor erf(const Tensor& x);
// approximate = "none" (erf form) or "tanh".
Tensor gelu(const Tensor& x, const std::string& approximate = "none");
Tensor silu(const Tensor& x);
// log(1 + exp(beta * x)) / beta, linear above `threshold` (as PyTorch).
Tensor softplus(const Tensor& x, double beta = 1.0, double threshold = 20.0);
Tensor square(const Tensor& x);

// Binary arithmetic with broadcasting; the result dtype follows
// promote_types (div of integers gives f32, like torch.div).
Tensor add(const Tensor& a, const Tensor& b);
Tensor sub(const Tensor& a, const Tensor& b);
Tensor mul(const Tensor& a, const Tensor& b);
Tensor div(const Tensor& a, const Tensor& b);
Tensor pow(const Tensor& a, const Tensor& b);
Tensor maximum(const Tensor& a, const Tensor& b);
Tensor minimum(const Tensor& a, const Tensor& b);
Tensor add(const Tensor& a, Scalar b);
Tensor sub(const Tensor& a, Scalar b);
Tensor mul(const Tensor& a, Scalar b);
Tensor div(const Tensor& a, Scalar b);
Tensor pow(const Tensor& a, Scalar b);
Tensor maximum(const Tensor& a, Scalar b);
Tensor minimum(const Tensor& a, Scalar b);
Tensor sub(Scalar a, const Tensor& b);
Tensor div(Scalar a, const Tensor& b);

// Comparisons give bool tensors.
Tensor eq(const Tensor& a, const Tensor& b);
Tensor ne(const Tensor& a, const Tensor& b);
Tensor lt(const Tensor& a, const Tensor& b);
Tensor le(const Tensor& a, const Tensor& b);
Tensor gt(const Tensor& a, const Tensor& b);
Tensor ge(const Tensor& a, const Tensor& b);
Tensor eq(const Tensor& a, Scalar b);
Tensor ne(const Tensor& a, Scalar b);
Tensor lt(const Tensor& a, Scalar b);
Tensor le(const Tensor& a, Scalar b);
Tensor gt(const Tensor& a, Scalar b);
Tensor ge(const Tensor& a, Scalar b);
Tensor logical_not(const Tensor& x);
Tensor logical_and(const Tensor& a, const Tensor& b);
Tensor logical_or(const Tensor& a, const Tensor& b);

// condition ? a : b, all three broadcast together; condition must be bool.
Tensor where(const Tensor& condition, const Tensor& a, const Tensor& b);
Tensor where(const Tensor& condition, const Tensor& a, Scalar b);
// x with `value` wherever mask (bool, broadcastable to x) is true.
Tensor masked_fill(const Tensor& x, const Tensor& mask, Scalar value);
// Limits x to [min, max]; either bound may be absent.
Tensor clamp(const Tensor& x, std::optional<double> min, std::optional<double> max);

// Converts to dtype (a copy, also when the dtype is unchanged; see Tensor::to).
Tensor cast(const Tensor& x, DType dtype);
// Copies any strided tensor into new contiguous memory.
Tensor copy(const Tensor& x);

inline Tensor operator-(const Tensor& x) { return neg(x); }
inline Tensor operator+(const Tensor& a, const Tensor& b) { return add(a, b); }
inline Tensor operator-(const Tensor& a, const Tensor& b) { return sub(a, b); }
inline Tensor operator*(const Tensor& a, const Tensor& b) { return mul(a, b); }
inline Tensor operator/(const Tensor& a, const Tensor& b) { return div(a, b); }
inline Tensor operator+(const Tensor& a, Scalar b) { return add(a, b); }
inline Tensor operator-(const Tensor& a, Scalar b) { return sub(a, b); }
inline Tensor operator*(const Tensor& a, Scalar b) { return mul(a, b); }
inline Tensor operator/(const Tensor& a, Scalar b) { return div(a, b); }
inline Tensor operator+(Scalar a, const Tensor& b) { return add(b, a); }
inline Tensor operator*(Scalar a, const Tensor& b) { return mul(b, a); }
inline Tensor operator-(Scalar a, const Tensor& b) { return sub(a, b); }
inline Tensor operator/(Scalar a, const Tensor& b) { return div(a, b); }

}  // namespace tessera
