#include "tessera/optim/clip_grad.h"

#include <algorithm>
#include <cmath>
#include <type_traits>

#include "tessera/core/grad_mode.h"

namespace tessera::optim {
namespace {

// The parameter's gradient made contiguous and stored back, so that in-place
// scaling reaches the tensor autograd accumulates into.
Tensor owned_grad(const Tensor& param) {
  Tensor grad = param.grad();
  if (!grad.defined()) return grad;
  TESSERA_CHECK(grad.dtype() == DType::f32 || grad.dtype() == DType::f64,
                "[clip_grad] gradients must be f32 or f64, got ", dtype_name(grad.dtype()));
  if (!grad.is_contiguous() || grad.shares_storage(param)) {
    NoGradGuard no_grad;
    grad = grad.contiguous().clone();
    Tensor handle = param;  // handles share the parameter's state
    handle.set_grad(grad);
  }
  return grad;
}

template <typename Fn>
void for_each_value(Tensor& grad, Fn&& fn) {
  if (grad.dtype() == DType::f32) {
    float* data = grad.data<float>();
    for (int64_t i = 0; i < grad.numel(); ++i) fn(data[i]);
  } else {
    double* data = grad.data<double>();
    for (int64_t i = 0; i < grad.numel(); ++i) fn(data[i]);
  }
}

}  // namespace

double clip_grad_norm_(const std::vector<Tensor>& params, double max_norm, double norm_type,
                       bool error_if_nonfinite) {
  TESSERA_CHECK(max_norm >= 0.0 && norm_type > 0.0, "[clip_grad_norm_] needs max_norm >= 0 and ",
                "norm_type > 0, got max_norm=", max_norm, ", norm_type=", norm_type);
  std::vector<Tensor> grads;
  for (const Tensor& param : params) {
    Tensor grad = owned_grad(param);
    if (grad.defined()) grads.push_back(grad);
  }
  const bool infinity = std::isinf(norm_type);
  double accumulated = 0.0;
  for (Tensor& grad : grads) {
    for_each_value(grad, [&](auto value) {
      const double magnitude = std::abs(static_cast<double>(value));
      if (infinity) {
        // NaN must win over any number, so the result reports it.
        accumulated = std::isnan(magnitude) ? magnitude : std::max(accumulated, magnitude);
      } else if (norm_type == 2.0) {
        accumulated += magnitude * magnitude;
      } else {
        accumulated += std::pow(magnitude, norm_type);
      }
    });
  }
  const double total = infinity           ? accumulated
                       : norm_type == 2.0 ? std::sqrt(accumulated)
                                          : std::pow(accumulated, 1.0 / norm_type);
  TESSERA_CHECK(!error_if_nonfinite || std::isfinite(total), "[clip_grad_norm_] the total ",
                norm_type, "-norm of the gradients is ", total,
                "; pass error_if_nonfinite=false to scale anyway");
  const double scale = max_norm / (total + 1e-6);
  if (scale < 1.0) {
    for (Tensor& grad : grads)
      for_each_value(grad, [&](auto& value) {
        value = static_cast<std::remove_reference_t<decltype(value)>>(value * scale);
      });
  }
  return total;
}

void clip_grad_value_(const std::vector<Tensor>& params, double clip_value) {
  TESSERA_CHECK(clip_value >= 0.0, "[clip_grad_value_] clip_value must be non-negative, got ",
                clip_value);
  for (const Tensor& param : params) {
    Tensor grad = owned_grad(param);
    if (!grad.defined()) continue;
    for_each_value(grad, [&](auto& value) {
      using T = std::remove_reference_t<decltype(value)>;
      value = std::clamp(value, static_cast<T>(-clip_value), static_cast<T>(clip_value));
    });
  }
}

}  // namespace tessera::optim
