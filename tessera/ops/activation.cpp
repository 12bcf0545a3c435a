// Activations (ops/activation.h), composed of elementwise ops: each is one
// where over branches whose gradients are PyTorch's, so values and
// gradients at the kinks match torch.nn.functional.

#include "tessera/ops/activation.h"

#include <cmath>

#include "tessera/ops/creation.h"
#include "tessera/ops/elementwise.h"
#include "tessera/ops/math.h"

namespace tessera {

namespace {

constexpr double kSeluAlpha = 1.6732632423543772848170429916717;
constexpr double kSeluScale = 1.0507009873554804934193349852946;

// The one check for activations PyTorch defines on floating tensors only.
void check_floating(const Tensor& x, const char* op) {
  TESSERA_CHECK(x.defined(), "[", op, "] got an undefined tensor");
  TESSERA_CHECK(is_floating(x.dtype()), "[", op, "] is defined for floating tensors only, got ",
                dtype_name(x.dtype()), "; cast it first (e.g. x.to(DType::f32))");
}

// alpha * (exp(x / scale) - 1) on the non-positive side only, so that a large
// positive x (not selected there) cannot turn the gradient into NaN.
Tensor negative_branch(const Tensor& x, double alpha, double scale) {
  return mul(expm1(div(clamp(x, std::nullopt, 0.0), scale)), alpha);
}

}  // namespace

Tensor leaky_relu(const Tensor& x, double negative_slope) {
  check_floating(x, "leaky_relu");
  return where(gt(x, 0.0), x, mul(x, negative_slope));
}

Tensor elu(const Tensor& x, double alpha) {
  check_floating(x, "elu");
  return where(gt(x, 0.0), x, negative_branch(x, alpha, 1.0));
}

Tensor selu(const Tensor& x) {
  check_floating(x, "selu");
  return mul(elu(x, kSeluAlpha), kSeluScale);
}

Tensor celu(const Tensor& x, double alpha) {
  check_floating(x, "celu");
  TESSERA_CHECK(alpha != 0.0, "[celu] alpha cannot be 0 (it divides x)");
  return where(gt(x, 0.0), x, negative_branch(x, alpha, alpha));
}

Tensor hardtanh(const Tensor& x, double min_val, double max_val) {
  TESSERA_CHECK(x.defined(), "[hardtanh] got an undefined tensor");
  TESSERA_CHECK(x.dtype() != DType::boolean, "[hardtanh] is not defined for bool tensors");
  // Strictly inside the bounds x passes (gradient 1); elsewhere the clamped
  // value is a constant (gradient 0), as PyTorch's hardtanh_backward.
  Tensor inside = logical_and(gt(x, min_val), lt(x, max_val));
  // The result keeps x's dtype (an integer tensor stays integral, as in PyTorch).
  return where(inside, x, clamp(x.detach(), min_val, max_val).to(x.dtype()));
}

Tensor relu6(const Tensor& x) { return hardtanh(x, 0.0, 6.0); }

Tensor hardswish(const Tensor& x) {
  check_floating(x, "hardswish");
  // Gradient 0 below -3, x / 3 + 0.5 on [-3, 3], 1 above, as PyTorch.
  Tensor middle = div(mul(x, add(x, 3.0)), 6.0);
  return where(lt(x, -3.0), zeros_like(x), where(le(x, 3.0), middle, x));
}

Tensor hardsigmoid(const Tensor& x) {
  check_floating(x, "hardsigmoid");
  // Gradient 1/6 strictly inside (-3, 3), else 0.
  Tensor middle = add(div(x, 6.0), 0.5);
  return where(le(x, -3.0), zeros_like(x), where(ge(x, 3.0), ones_like(x), middle));
}

Tensor mish(const Tensor& x) {
  check_floating(x, "mish");
  return mul(x, tanh(softplus(x)));
}

Tensor glu(const Tensor& x, int64_t dim) {
  check_floating(x, "glu");
  TESSERA_CHECK(x.dim() > 0, "[glu] does not support 0-d tensors: halving needs a dim of even size");
  const int64_t ndim = x.dim();
  TESSERA_CHECK(dim >= -ndim && dim < ndim, "[glu] dim ", dim, " is out of range for a ", ndim,
                "-d tensor; valid: [", -ndim, ", ", ndim - 1, "]");
  const int64_t d = dim < 0 ? dim + ndim : dim;
  TESSERA_CHECK(x.size(d) % 2 == 0, "[glu] halving dimension must be even, but dim ", dim,
                " of ", shape_str(x.shape()), " has size ", x.size(d));
  const int64_t half = x.size(d) / 2;
  return mul(x.narrow(d, 0, half), sigmoid(x.narrow(d, half, half)));
}

Tensor logsigmoid(const Tensor& x) {
  check_floating(x, "logsigmoid");
  return neg(softplus(neg(x)));
}

Tensor softsign(const Tensor& x) {
  TESSERA_CHECK(x.defined(), "[softsign] got an undefined tensor");
  return div(x, add(abs(x), 1));
}

Tensor prelu(const Tensor& x, const Tensor& weight) {
  check_floating(x, "prelu");
  TESSERA_CHECK(weight.defined(), "[prelu] got an undefined weight");
  TESSERA_CHECK(weight.dim() <= 1, "[prelu] weight must be 0-d or 1-d, got shape ",
                shape_str(weight.shape()));
  const int64_t channels = x.dim() >= 2 ? x.size(1) : 1;
  TESSERA_CHECK(weight.numel() == 1 || weight.numel() == channels, "[prelu] weight has ",
                weight.numel(), " elements; expected 1 or the number of channels (", channels,
                ", x.size(1) of ", shape_str(x.shape()), ")");
  Tensor slope = weight;
  if (weight.numel() == 1) {
    slope = weight.reshape({});
  } else if (x.dim() >= 2) {
    Shape shape(static_cast<size_t>(x.dim() - 1), 1);
    shape[0] = channels;
    slope = weight.reshape(shape);
  }
  return where(gt(x, 0.0), x, mul(slope, x));
}

Tensor threshold(const Tensor& x, double threshold, Scalar value) {
  TESSERA_CHECK(x.defined(), "[threshold] got an undefined tensor");
  return where(gt(x, threshold), x, value);
}

}  // namespace tessera
