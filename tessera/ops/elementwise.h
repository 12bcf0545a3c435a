#pragma once

// Elementwise ops: unary math, binary arithmetic with NumPy broadcasting and
// PyTorch type promotion, comparisons, selection and casts.

#include <optional>
#include <string>
#include <vector>

#include "tessera/core/tensor.h"
#include "tessera/ops/scalar.h"

namespace tessera {

// The dtype PyTorch computes a binary op in (torch.result_type): the highest
// category (bool < integers < floating) wins; within the category of the
// result, tensors with dims outrank 0-d tensors, so an i64 or f64 0-d tensor
// combined with an f32 tensor gives f32, while an f64 0-d tensor combined
// with an i32 tensor gives f64.
DType result_type(const Tensor& a, const Tensor& b);
DType result_type(const std::vector<Tensor>& tensors);

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
// grad * gelu'(input), in one kernel (gelu's gradient).
Tensor gelu_backward(const Tensor& grad, const Tensor& input,
                     const std::string& approximate = "none");
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
// a + alpha * b and a - alpha * b (torch.add/sub with alpha); alpha must be
// an integer for integer tensors, as in PyTorch.
Tensor add(const Tensor& a, const Tensor& b, Scalar alpha);
Tensor add(const Tensor& a, Scalar b, Scalar alpha);
Tensor sub(const Tensor& a, const Tensor& b, Scalar alpha);
Tensor sub(const Tensor& a, Scalar b, Scalar alpha);
// Division rounded as rounding_mode says: "trunc" (toward zero), "floor"
// (toward -inf, Python's //), or none for true division. With a mode,
// integer inputs give integers (dividing by zero raises) and the gradient
// is zero, as in PyTorch.
Tensor div(const Tensor& a, const Tensor& b, const std::optional<std::string>& rounding_mode);
Tensor div(const Tensor& a, Scalar b, const std::optional<std::string>& rounding_mode);

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
// x with `value` wherever mask (bool) is true; x and mask broadcast together
// (the result has their broadcast shape). A tensor value must be 0-d; it is
// converted to x's dtype and receives the gradient of the filled elements.
Tensor masked_fill(const Tensor& x, const Tensor& mask, Scalar value);
Tensor masked_fill(const Tensor& x, const Tensor& mask, const Tensor& value);
// Limits x to [min, max], as min(max(x, min), max) (so max wins where
// min > max); either bound may be absent, not both. A floating bound on an
// integer tensor gives a floating result, as torch.result_type.
Tensor clamp(const Tensor& x, std::optional<Scalar> min, std::optional<Scalar> max);
// Tensor bounds broadcast with x; the result dtype is the result_type of x
// and the bounds. Gradients flow to x where it lies within the bounds, and
// to a bound where it is the one that applies.
Tensor clamp(const Tensor& x, const std::optional<Tensor>& min, const std::optional<Tensor>& max);
Tensor clamp_min(const Tensor& x, Scalar min);
Tensor clamp_min(const Tensor& x, const Tensor& min);
Tensor clamp_max(const Tensor& x, Scalar max);
Tensor clamp_max(const Tensor& x, const Tensor& max);

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
