// Comparison operators and closeness tests, composed of the comparison ops.

#include "tessera/ops/comparison.h"

#include <limits>

#include "tessera/core/grad_mode.h"
#include "tessera/ops/elementwise.h"

namespace tessera {

Tensor operator==(const Tensor& a, const Tensor& b) { return eq(a, b); }
Tensor operator!=(const Tensor& a, const Tensor& b) { return ne(a, b); }
Tensor operator<(const Tensor& a, const Tensor& b) { return lt(a, b); }
Tensor operator<=(const Tensor& a, const Tensor& b) { return le(a, b); }
Tensor operator>(const Tensor& a, const Tensor& b) { return gt(a, b); }
Tensor operator>=(const Tensor& a, const Tensor& b) { return ge(a, b); }
Tensor operator==(const Tensor& a, Scalar b) { return eq(a, b); }
Tensor operator!=(const Tensor& a, Scalar b) { return ne(a, b); }
Tensor operator<(const Tensor& a, Scalar b) { return lt(a, b); }
Tensor operator<=(const Tensor& a, Scalar b) { return le(a, b); }
Tensor operator>(const Tensor& a, Scalar b) { return gt(a, b); }
Tensor operator>=(const Tensor& a, Scalar b) { return ge(a, b); }
Tensor operator==(Scalar a, const Tensor& b) { return eq(b, a); }
Tensor operator!=(Scalar a, const Tensor& b) { return ne(b, a); }
Tensor operator<(Scalar a, const Tensor& b) { return gt(b, a); }
Tensor operator<=(Scalar a, const Tensor& b) { return ge(b, a); }
Tensor operator>(Scalar a, const Tensor& b) { return lt(b, a); }
Tensor operator>=(Scalar a, const Tensor& b) { return le(b, a); }

Tensor isclose(const Tensor& a, const Tensor& b, double rtol, double atol, bool equal_nan) {
  TESSERA_CHECK(a.defined() && b.defined(), "[isclose] got an undefined tensor");
  TESSERA_CHECK(rtol >= 0.0 && atol >= 0.0, "[isclose] rtol (", rtol, ") and atol (", atol,
                ") must be non-negative");
  TESSERA_CHECK((a.dtype() == DType::boolean) == (b.dtype() == DType::boolean),
                "[isclose] cannot compare a ", dtype_name(a.dtype()), " tensor with a ",
                dtype_name(b.dtype()), " one; cast the bool one first");
  NoGradGuard no_grad;
  Tensor close = eq(a, b);
  if (a.dtype() == DType::boolean) return close;
  const DType wide = is_floating(a.dtype()) || is_floating(b.dtype())
                         ? promote_types(promote_types(a.dtype(), b.dtype()), DType::f32)
                         : DType::f64;
  Tensor x = a.to(wide);
  Tensor y = b.to(wide);
  Tensor difference = abs(sub(x, y));
  Tensor tolerance = add(mul(abs(y), rtol), atol);
  // Infinite differences (an infinity against anything else) and NaN
  // compare false here; equal infinities are caught by eq above.
  close = logical_or(close, logical_and(le(difference, tolerance),
                                        lt(difference, std::numeric_limits<double>::infinity())));
  if (equal_nan) close = logical_or(close, logical_and(ne(x, x), ne(y, y)));
  return close;
}

bool allclose(const Tensor& a, const Tensor& b, double rtol, double atol, bool equal_nan) {
  Tensor close = isclose(a, b, rtol, atol, equal_nan);
  NoGradGuard no_grad;
  for (int64_t flag : close.to(DType::i64).to_vector<int64_t>()) {
    if (flag == 0) return false;
  }
  return true;
}

bool equal(const Tensor& a, const Tensor& b) {
  TESSERA_CHECK(a.defined() && b.defined(), "[equal] got an undefined tensor");
  if (a.shape() != b.shape()) return false;
  NoGradGuard no_grad;
  for (int64_t flag : eq(a, b).to(DType::i64).to_vector<int64_t>()) {
    if (flag == 0) return false;
  }
  return true;
}

}  // namespace tessera
