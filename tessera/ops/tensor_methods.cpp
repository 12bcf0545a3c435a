// The Tensor methods that are forms of ops (x.sum(), x.exp(), x.add_(y)):
// defined here, in the ops layer, so that the core Tensor does not depend on
// the ops it names.

#include "tessera/core/grad_mode.h"
#include "tessera/core/tensor.h"
#include "tessera/ops/elementwise.h"
#include "tessera/ops/in_place.h"
#include "tessera/ops/matmul.h"
#include "tessera/ops/reduce.h"
#include "tessera/ops/scalar.h"
#include "tessera/ops/softmax.h"

namespace tessera {

Tensor Tensor::sum(const std::vector<int64_t>& dims, bool keepdim) const {
  return tessera::sum(*this, dims, keepdim);
}
Tensor Tensor::mean(const std::vector<int64_t>& dims, bool keepdim) const {
  return tessera::mean(*this, dims, keepdim);
}
Tensor Tensor::max() const { return tessera::max(*this); }
Tensor Tensor::min() const { return tessera::min(*this); }
Tensor Tensor::argmax(std::optional<int64_t> dim, bool keepdim) const {
  return tessera::argmax(*this, dim, keepdim);
}
Tensor Tensor::argmin(std::optional<int64_t> dim, bool keepdim) const {
  return tessera::argmin(*this, dim, keepdim);
}
Tensor Tensor::matmul(const Tensor& other) const { return tessera::matmul(*this, other); }
Tensor Tensor::softmax(int64_t dim) const { return tessera::softmax(*this, dim); }
Tensor Tensor::log_softmax(int64_t dim) const { return tessera::log_softmax(*this, dim); }
Tensor Tensor::neg() const { return tessera::neg(*this); }
Tensor Tensor::abs() const { return tessera::abs(*this); }
Tensor Tensor::exp() const { return tessera::exp(*this); }
Tensor Tensor::log() const { return tessera::log(*this); }
Tensor Tensor::sqrt() const { return tessera::sqrt(*this); }
Tensor Tensor::rsqrt() const { return tessera::rsqrt(*this); }
Tensor Tensor::sin() const { return tessera::sin(*this); }
Tensor Tensor::cos() const { return tessera::cos(*this); }
Tensor Tensor::tanh() const { return tessera::tanh(*this); }
Tensor Tensor::sigmoid() const { return tessera::sigmoid(*this); }
Tensor Tensor::relu() const { return tessera::relu(*this); }
Tensor Tensor::square() const { return tessera::square(*this); }
Tensor Tensor::pow(const Tensor& exponent) const { return tessera::pow(*this, exponent); }
Tensor Tensor::pow(Scalar exponent) const { return tessera::pow(*this, exponent); }
Tensor Tensor::clamp(std::optional<double> min, std::optional<double> max) const {
  return tessera::clamp(*this, min, max);
}

namespace {

// PyTorch's canCast: no floating result into an integral tensor, and only
// bool into bool.
void check_castable(DType result, const Tensor& x, const char* op) {
  const bool allowed = (!is_floating(result) || is_floating(x.dtype())) &&
                       (x.dtype() != DType::boolean || result == DType::boolean);
  TESSERA_CHECK(allowed, "[", op, "] the result type ", dtype_name(result),
                " can't be cast to the destination's type ", dtype_name(x.dtype()), " (shape ",
                shape_str(x.shape()), "); cast the destination first (x.to(", dtype_name(result),
                ")) or write out of place");
}

// x.op_(args): computes fn(x) out of place and writes it back. When autograd
// records, fn reads a copy of x, since the op may save its input for the
// gradient and the write back would invalidate it.
template <typename Fn>
Tensor& write_back(Tensor& x, bool operand_tracked, const char* op, Fn fn) {
  TESSERA_CHECK(x.defined(), "[", op, "] the destination is an undefined tensor");
  const bool tracked = grad_enabled() && (x.requires_grad() || operand_tracked);
  Tensor result = fn(tracked ? x.clone() : x);
  check_castable(result.dtype(), x, op);
  TESSERA_CHECK(result.shape() == x.shape(), "[", op, "] the result's shape ",
                shape_str(result.shape()), " does not match the destination's ",
                shape_str(x.shape()), "; the operand must broadcast to the destination");
  x.copy_(result);
  return x;
}

bool tracked(const Tensor& operand, const char* op) {
  TESSERA_CHECK(operand.defined(), "[", op, "] the operand is an undefined tensor");
  return operand.requires_grad();
}

}  // namespace

Tensor& Tensor::add_(const Tensor& other) {
  return write_back(*this, tracked(other, "add_"), "add_",
                    [&](const Tensor& x) { return tessera::add(x, other); });
}
Tensor& Tensor::add_(Scalar other) {
  return write_back(*this, false, "add_", [&](const Tensor& x) { return tessera::add(x, other); });
}
Tensor& Tensor::sub_(const Tensor& other) {
  return write_back(*this, tracked(other, "sub_"), "sub_",
                    [&](const Tensor& x) { return tessera::sub(x, other); });
}
Tensor& Tensor::sub_(Scalar other) {
  return write_back(*this, false, "sub_", [&](const Tensor& x) { return tessera::sub(x, other); });
}
Tensor& Tensor::mul_(const Tensor& other) {
  return write_back(*this, tracked(other, "mul_"), "mul_",
                    [&](const Tensor& x) { return tessera::mul(x, other); });
}
Tensor& Tensor::mul_(Scalar other) {
  return write_back(*this, false, "mul_", [&](const Tensor& x) { return tessera::mul(x, other); });
}
Tensor& Tensor::div_(const Tensor& other) {
  return write_back(*this, tracked(other, "div_"), "div_",
                    [&](const Tensor& x) { return tessera::div(x, other); });
}
Tensor& Tensor::div_(Scalar other) {
  return write_back(*this, false, "div_", [&](const Tensor& x) { return tessera::div(x, other); });
}
Tensor& Tensor::pow_(const Tensor& exponent) {
  return write_back(*this, tracked(exponent, "pow_"), "pow_",
                    [&](const Tensor& x) { return tessera::pow(x, exponent); });
}
Tensor& Tensor::pow_(Scalar exponent) {
  return write_back(*this, false, "pow_",
                    [&](const Tensor& x) { return tessera::pow(x, exponent); });
}
Tensor& Tensor::neg_() {
  return write_back(*this, false, "neg_", [](const Tensor& x) { return tessera::neg(x); });
}
Tensor& Tensor::abs_() {
  return write_back(*this, false, "abs_", [](const Tensor& x) { return tessera::abs(x); });
}
Tensor& Tensor::exp_() {
  return write_back(*this, false, "exp_", [](const Tensor& x) { return tessera::exp(x); });
}
Tensor& Tensor::sqrt_() {
  return write_back(*this, false, "sqrt_", [](const Tensor& x) { return tessera::sqrt(x); });
}
Tensor& Tensor::relu_() {
  return write_back(*this, false, "relu_", [](const Tensor& x) { return tessera::relu(x); });
}
Tensor& Tensor::sigmoid_() {
  return write_back(*this, false, "sigmoid_", [](const Tensor& x) { return tessera::sigmoid(x); });
}
Tensor& Tensor::tanh_() {
  return write_back(*this, false, "tanh_", [](const Tensor& x) { return tessera::tanh(x); });
}
Tensor& Tensor::clamp_(std::optional<double> min, std::optional<double> max) {
  return write_back(*this, false, "clamp_",
                    [&](const Tensor& x) { return tessera::clamp(x, min, max); });
}

Tensor operator+=(Tensor x, const Tensor& other) { return x.add_(other); }
Tensor operator-=(Tensor x, const Tensor& other) { return x.sub_(other); }
Tensor operator*=(Tensor x, const Tensor& other) { return x.mul_(other); }
Tensor operator/=(Tensor x, const Tensor& other) { return x.div_(other); }
Tensor operator+=(Tensor x, Scalar other) { return x.add_(other); }
Tensor operator-=(Tensor x, Scalar other) { return x.sub_(other); }
Tensor operator*=(Tensor x, Scalar other) { return x.mul_(other); }
Tensor operator/=(Tensor x, Scalar other) { return x.div_(other); }

}  // namespace tessera
