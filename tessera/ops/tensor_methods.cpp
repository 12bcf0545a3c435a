// The Tensor methods that are forms of ops (x.sum(), x.exp(), x.add_(y)):
// defined here, in the ops layer, so that the core Tensor does not depend on
// the ops it names.

#include "tessera/core/grad_mode.h"
#include "tessera/core/tensor.h"
#include "tessera/ops/elementwise.h"
#include "tessera/ops/in_place.h"
#include "tessera/ops/index.h"
#include "tessera/ops/linalg.h"
#include "tessera/ops/math.h"
#include "tessera/ops/matmul.h"
#include "tessera/ops/reduce.h"
#include "tessera/ops/scalar.h"
#include "tessera/ops/scan.h"
#include "tessera/ops/shape_ops.h"
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
Tensor Tensor::softmax(int64_t dim, std::optional<DType> dtype) const {
  return tessera::softmax(*this, dim, dtype);
}
Tensor Tensor::log_softmax(int64_t dim, std::optional<DType> dtype) const {
  return tessera::log_softmax(*this, dim, dtype);
}
Tensor Tensor::norm(double p, const std::vector<int64_t>& dims, bool keepdim) const {
  return tessera::norm(*this, p, dims, keepdim);
}
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
Tensor Tensor::t() const { return tessera::t(*this); }

std::tuple<Tensor, Tensor> Tensor::max(int64_t dim, bool keepdim) const {
  return tessera::max(*this, dim, keepdim);
}
std::tuple<Tensor, Tensor> Tensor::min(int64_t dim, bool keepdim) const {
  return tessera::min(*this, dim, keepdim);
}
Tensor Tensor::amax(const std::vector<int64_t>& dims, bool keepdim) const {
  return tessera::amax(*this, dims, keepdim);
}
Tensor Tensor::amin(const std::vector<int64_t>& dims, bool keepdim) const {
  return tessera::amin(*this, dims, keepdim);
}
Tensor Tensor::prod() const { return tessera::prod(*this); }
Tensor Tensor::prod(int64_t dim, bool keepdim) const { return tessera::prod(*this, dim, keepdim); }
Tensor Tensor::all() const { return tessera::all(*this); }
Tensor Tensor::all(int64_t dim, bool keepdim) const { return tessera::all(*this, dim, keepdim); }
Tensor Tensor::any() const { return tessera::any(*this); }
Tensor Tensor::any(int64_t dim, bool keepdim) const { return tessera::any(*this, dim, keepdim); }
Tensor Tensor::var(const std::vector<int64_t>& dims, int64_t correction, bool keepdim) const {
  return tessera::var(*this, dims, correction, keepdim);
}
Tensor Tensor::std(const std::vector<int64_t>& dims, int64_t correction, bool keepdim) const {
  return tessera::std(*this, dims, correction, keepdim);
}
Tensor Tensor::logsumexp(const std::vector<int64_t>& dims, bool keepdim) const {
  return tessera::logsumexp(*this, dims, keepdim);
}
Tensor Tensor::count_nonzero(const std::vector<int64_t>& dims) const {
  return tessera::count_nonzero(*this, dims);
}
Tensor Tensor::cumsum(int64_t dim) const { return tessera::cumsum(*this, dim); }
Tensor Tensor::cumprod(int64_t dim) const { return tessera::cumprod(*this, dim); }
std::tuple<Tensor, Tensor> Tensor::sort(int64_t dim, bool descending) const {
  return tessera::sort(*this, dim, descending);
}
Tensor Tensor::argsort(int64_t dim, bool descending) const {
  return tessera::argsort(*this, dim, descending);
}
std::tuple<Tensor, Tensor> Tensor::topk(int64_t k, int64_t dim, bool largest, bool sorted) const {
  return tessera::topk(*this, k, dim, largest, sorted);
}

// Binary methods with a tensor and a scalar form: x.add(y), x.add(2).
#define TESSERA_BINARY_METHOD(name)                                                   \
  Tensor Tensor::name(const Tensor& other) const { return tessera::name(*this, other); } \
  Tensor Tensor::name(Scalar other) const { return tessera::name(*this, other); }
TESSERA_BINARY_METHOD(add)
TESSERA_BINARY_METHOD(sub)
TESSERA_BINARY_METHOD(mul)
TESSERA_BINARY_METHOD(div)
TESSERA_BINARY_METHOD(eq)
TESSERA_BINARY_METHOD(ne)
TESSERA_BINARY_METHOD(lt)
TESSERA_BINARY_METHOD(le)
TESSERA_BINARY_METHOD(gt)
TESSERA_BINARY_METHOD(ge)
TESSERA_BINARY_METHOD(remainder)
TESSERA_BINARY_METHOD(fmod)
#undef TESSERA_BINARY_METHOD

// Methods that forward to the op of the same name with this tensor first.
#define TESSERA_UNARY_METHOD(name) \
  Tensor Tensor::name() const { return tessera::name(*this); }
TESSERA_UNARY_METHOD(logical_not)
TESSERA_UNARY_METHOD(floor)
TESSERA_UNARY_METHOD(ceil)
TESSERA_UNARY_METHOD(trunc)
TESSERA_UNARY_METHOD(frac)
TESSERA_UNARY_METHOD(sign)
TESSERA_UNARY_METHOD(reciprocal)
TESSERA_UNARY_METHOD(log1p)
TESSERA_UNARY_METHOD(expm1)
TESSERA_UNARY_METHOD(log2)
TESSERA_UNARY_METHOD(log10)
TESSERA_UNARY_METHOD(erf)
TESSERA_UNARY_METHOD(erfc)
TESSERA_UNARY_METHOD(isnan)
TESSERA_UNARY_METHOD(isinf)
TESSERA_UNARY_METHOD(isfinite)
TESSERA_UNARY_METHOD(nonzero)
TESSERA_UNARY_METHOD(trace)
#undef TESSERA_UNARY_METHOD

Tensor Tensor::maximum(const Tensor& other) const { return tessera::maximum(*this, other); }
Tensor Tensor::minimum(const Tensor& other) const { return tessera::minimum(*this, other); }
Tensor Tensor::logical_and(const Tensor& other) const {
  return tessera::logical_and(*this, other);
}
Tensor Tensor::logical_or(const Tensor& other) const { return tessera::logical_or(*this, other); }
Tensor Tensor::round(int64_t decimals) const { return tessera::round(*this, decimals); }
Tensor Tensor::nan_to_num(double nan, std::optional<double> posinf,
                          std::optional<double> neginf) const {
  return tessera::nan_to_num(*this, nan, posinf, neginf);
}
Tensor Tensor::lerp(const Tensor& end, Scalar weight) const {
  return tessera::lerp(*this, end, weight);
}
Tensor Tensor::where(const Tensor& condition, const Tensor& other) const {
  return tessera::where(condition, *this, other);
}
Tensor Tensor::masked_fill(const Tensor& mask, Scalar value) const {
  return tessera::masked_fill(*this, mask, value);
}
Tensor Tensor::masked_fill(const Tensor& mask, const Tensor& value) const {
  return tessera::masked_fill(*this, mask, value);
}
Tensor Tensor::flip(const std::vector<int64_t>& dims) const { return tessera::flip(*this, dims); }
Tensor Tensor::roll(const std::vector<int64_t>& shifts, const std::vector<int64_t>& dims) const {
  return tessera::roll(*this, shifts, dims);
}
Tensor Tensor::repeat(const std::vector<int64_t>& repeats) const {
  return tessera::repeat(*this, repeats);
}
Tensor Tensor::tile(const std::vector<int64_t>& reps) const { return tessera::tile(*this, reps); }
Tensor Tensor::repeat_interleave(int64_t repeats, std::optional<int64_t> dim) const {
  return tessera::repeat_interleave(*this, repeats, dim);
}
Tensor Tensor::movedim(int64_t source, int64_t destination) const {
  return tessera::movedim(*this, source, destination);
}
Tensor Tensor::swapaxes(int64_t axis0, int64_t axis1) const {
  return tessera::swapaxes(*this, axis0, axis1);
}
std::vector<Tensor> Tensor::unbind(int64_t dim) const { return tessera::unbind(*this, dim); }
Tensor Tensor::gather(int64_t dim, const Tensor& index) const {
  return tessera::gather(*this, dim, index);
}
Tensor Tensor::index_select(int64_t dim, const Tensor& index) const {
  return tessera::index_select(*this, dim, index);
}
Tensor Tensor::take_along_dim(const Tensor& indices, std::optional<int64_t> dim) const {
  return tessera::take_along_dim(*this, indices, dim);
}
Tensor Tensor::scatter(int64_t dim, const Tensor& index, const Tensor& src) const {
  return tessera::scatter(*this, dim, index, src);
}
Tensor Tensor::scatter(int64_t dim, const Tensor& index, Scalar value) const {
  return tessera::scatter(*this, dim, index, value);
}
Tensor Tensor::scatter_add(int64_t dim, const Tensor& index, const Tensor& src) const {
  return tessera::scatter_add(*this, dim, index, src);
}
Tensor Tensor::scatter_reduce(int64_t dim, const Tensor& index, const Tensor& src,
                              const std::string& reduce, bool include_self) const {
  return tessera::scatter_reduce(*this, dim, index, src, reduce, include_self);
}
Tensor Tensor::index_add(int64_t dim, const Tensor& index, const Tensor& source,
                         double alpha) const {
  return tessera::index_add(*this, dim, index, source, alpha);
}
Tensor Tensor::index_fill(int64_t dim, const Tensor& index, Scalar value) const {
  return tessera::index_fill(*this, dim, index, value);
}
Tensor Tensor::masked_select(const Tensor& mask) const {
  return tessera::masked_select(*this, mask);
}
Tensor Tensor::mm(const Tensor& other) const { return tessera::mm(*this, other); }
Tensor Tensor::bmm(const Tensor& other) const { return tessera::bmm(*this, other); }
Tensor Tensor::mv(const Tensor& vec) const { return tessera::mv(*this, vec); }
Tensor Tensor::dot(const Tensor& other) const { return tessera::dot(*this, other); }
Tensor Tensor::outer(const Tensor& other) const { return tessera::outer(*this, other); }
Tensor Tensor::diag(int64_t diagonal) const { return tessera::diag(*this, diagonal); }
Tensor Tensor::diagonal(int64_t offset, int64_t dim1, int64_t dim2) const {
  return tessera::diagonal(*this, offset, dim1, dim2);
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
Tensor& Tensor::masked_fill_(const Tensor& mask, Scalar value) {
  return write_back(*this, false, "masked_fill_",
                    [&](const Tensor& x) { return tessera::masked_fill(x, mask, value); });
}
Tensor& Tensor::masked_fill_(const Tensor& mask, const Tensor& value) {
  return write_back(*this, tracked(value, "masked_fill_"), "masked_fill_",
                    [&](const Tensor& x) { return tessera::masked_fill(x, mask, value); });
}
Tensor& Tensor::scatter_(int64_t dim, const Tensor& index, const Tensor& src) {
  return write_back(*this, tracked(src, "scatter_"), "scatter_",
                    [&](const Tensor& x) { return tessera::scatter(x, dim, index, src); });
}
Tensor& Tensor::scatter_(int64_t dim, const Tensor& index, Scalar value) {
  return write_back(*this, false, "scatter_",
                    [&](const Tensor& x) { return tessera::scatter(x, dim, index, value); });
}
Tensor& Tensor::scatter_add_(int64_t dim, const Tensor& index, const Tensor& src) {
  return write_back(*this, tracked(src, "scatter_add_"), "scatter_add_",
                    [&](const Tensor& x) { return tessera::scatter_add(x, dim, index, src); });
}
Tensor& Tensor::scatter_reduce_(int64_t dim, const Tensor& index, const Tensor& src,
                                const std::string& reduce, bool include_self) {
  return write_back(*this, tracked(src, "scatter_reduce_"), "scatter_reduce_",
                    [&](const Tensor& x) {
                      return tessera::scatter_reduce(x, dim, index, src, reduce, include_self);
                    });
}
Tensor& Tensor::index_add_(int64_t dim, const Tensor& index, const Tensor& source,
                           double alpha) {
  return write_back(*this, tracked(source, "index_add_"), "index_add_", [&](const Tensor& x) {
    return tessera::index_add(x, dim, index, source, alpha);
  });
}
Tensor& Tensor::index_fill_(int64_t dim, const Tensor& index, Scalar value) {
  return write_back(*this, false, "index_fill_",
                    [&](const Tensor& x) { return tessera::index_fill(x, dim, index, value); });
}
Tensor& Tensor::floor_() {
  return write_back(*this, false, "floor_", [](const Tensor& x) { return tessera::floor(x); });
}
Tensor& Tensor::ceil_() {
  return write_back(*this, false, "ceil_", [](const Tensor& x) { return tessera::ceil(x); });
}
Tensor& Tensor::round_() {
  return write_back(*this, false, "round_", [](const Tensor& x) { return tessera::round(x); });
}
Tensor& Tensor::trunc_() {
  return write_back(*this, false, "trunc_", [](const Tensor& x) { return tessera::trunc(x); });
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
