// In-place arithmetic: out-of-place op, castability check, copy_ back.

#include "tessera/ops/in_place.h"

#include "tessera/core/grad_mode.h"
#include "tessera/ops/elementwise.h"

namespace tessera {
namespace {

// PyTorch's canCast: no floating result into an integral tensor, and only
// bool into bool.
void check_castable(DType result, const Tensor& x, const char* op) {
  const bool allowed = (!is_floating(result) || is_floating(x.dtype())) &&
                       (x.dtype() != DType::boolean || result == DType::boolean);
  TESSERA_CHECK(allowed, "[", op, "] the result type ", dtype_name(result),
                " can't be cast to the destination's type ", dtype_name(x.dtype()),
                " (shape ", shape_str(x.shape()), "); cast the destination first (x.to(",
                dtype_name(result), ")) or write out of place");
}

// The operand that the out-of-place op reads in place of x: a copy when the
// op may save it for its gradient, which the write back would invalidate.
Tensor operand(const Tensor& x, bool tracked) { return tracked ? x.clone() : x; }

template <typename Other, typename Fn>
Tensor apply(Tensor x, const Other& other, const char* op, Fn fn) {
  TESSERA_CHECK(x.defined(), "[", op, "] the destination is an undefined tensor");
  bool tracked = grad_enabled() && x.requires_grad();
  if constexpr (std::is_same_v<Other, Tensor>) {
    TESSERA_CHECK(other.defined(), "[", op, "] the operand is an undefined tensor");
    tracked = tracked || (grad_enabled() && other.requires_grad());
  }
  Tensor result = fn(operand(x, tracked), other);
  check_castable(result.dtype(), x, op);
  TESSERA_CHECK(result.shape() == x.shape(), "[", op, "] the result's shape ",
                shape_str(result.shape()), " does not match the destination's ",
                shape_str(x.shape()), "; the operand must broadcast to the destination");
  x.copy_(result);
  return x;
}

}  // namespace

Tensor operator+=(Tensor x, const Tensor& other) {
  return apply(std::move(x), other, "add_", [](const Tensor& a, const Tensor& b) { return add(a, b); });
}
Tensor operator-=(Tensor x, const Tensor& other) {
  return apply(std::move(x), other, "sub_", [](const Tensor& a, const Tensor& b) { return sub(a, b); });
}
Tensor operator*=(Tensor x, const Tensor& other) {
  return apply(std::move(x), other, "mul_", [](const Tensor& a, const Tensor& b) { return mul(a, b); });
}
Tensor operator/=(Tensor x, const Tensor& other) {
  return apply(std::move(x), other, "div_", [](const Tensor& a, const Tensor& b) { return div(a, b); });
}
Tensor operator+=(Tensor x, Scalar other) {
  return apply(std::move(x), other, "add_", [](const Tensor& a, Scalar b) { return add(a, b); });
}
Tensor operator-=(Tensor x, Scalar other) {
  return apply(std::move(x), other, "sub_", [](const Tensor& a, Scalar b) { return sub(a, b); });
}
Tensor operator*=(Tensor x, Scalar other) {
  return apply(std::move(x), other, "mul_", [](const Tensor& a, Scalar b) { return mul(a, b); });
}
Tensor operator/=(Tensor x, Scalar other) {
  return apply(std::move(x), other, "div_", [](const Tensor& a, Scalar b) { return div(a, b); });
}

}  // namespace tessera
