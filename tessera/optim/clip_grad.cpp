#include "tessera/optim/clip_grad.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "tessera/core/grad_mode.h"
#include "tessera/ops/creation.h"
#include "tessera/ops/dispatch.h"
#include "tessera/ops/elementwise.h"
#include "tessera/ops/linalg.h"

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

// The p-norm of one gradient, as a number every rank agrees on (a global
// gradient's norm is reduced over its shards by the ops themselves).
double norm_of(const Tensor& grad, double norm_type) {
  if (grad.numel() == 0) return 0.0;
  Tensor norm = vector_norm(grad, norm_type);
  if (norm.is_global()) {
    const NdSbp broadcast(
        std::vector<Sbp>(static_cast<size_t>(norm.nd_sbp().ndim()), Sbp::broadcast()));
    norm = norm.to_global(norm.placement(), broadcast).to_local();
  }
  return norm.item<double>();
}

// Under a graph trace the norm stays a tensor: the scale min(1, max_norm /
// (norm + 1e-6)) multiplies every gradient inside the graph, as PyTorch's
// clip_grad_norm_ does without reading the norm on the host.
void clip_traced(const std::vector<Tensor>& grads, double max_norm, double norm_type) {
  NoGradGuard no_grad;
  const bool infinity = std::isinf(norm_type);
  Tensor accumulated;
  for (const Tensor& grad : grads) {
    if (grad.numel() == 0) continue;
    Tensor own = vector_norm(grad, norm_type);
    if (!infinity) own = pow(own, norm_type);
    accumulated = !accumulated.defined() ? own
                  : infinity             ? maximum(accumulated, own)
                                         : add(accumulated, own);
  }
  if (!accumulated.defined()) return;
  const Tensor total = infinity ? accumulated : pow(accumulated, 1.0 / norm_type);
  const Tensor scale = clamp_max(div(full({}, max_norm, total.dtype()), add(total, 1e-6)), 1.0);
  for (Tensor grad : grads) grad.copy_(mul(grad, scale));  // handles share the gradient
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
  if (mode_active()) {
    clip_traced(grads, max_norm, norm_type);
    return std::numeric_limits<double>::quiet_NaN();  // not known on the host while tracing
  }
  const bool infinity = std::isinf(norm_type);
  NoGradGuard no_grad;
  double accumulated = 0.0;
  for (const Tensor& grad : grads) {
    const double own = norm_of(grad, norm_type);
    // NaN must win over any number, so the result reports it.
    accumulated = infinity ? (std::isnan(own) ? own : std::max(accumulated, own))
                           : accumulated + std::pow(own, norm_type);
  }
  const double total = infinity ? accumulated : std::pow(accumulated, 1.0 / norm_type);
  TESSERA_CHECK(!error_if_nonfinite || std::isfinite(total), "[clip_grad_norm_] the total ",
                norm_type, "-norm of the gradients is ", total,
                "; pass error_if_nonfinite=false to scale anyway");
  const double scale = max_norm / (total + 1e-6);
  if (scale < 1.0) {
    for (Tensor& grad : grads) grad.copy_(mul(grad, scale));
  }
  return total;
}

void clip_grad_value_(const std::vector<Tensor>& params, double clip_value) {
  TESSERA_CHECK(clip_value >= 0.0, "[clip_grad_value_] clip_value must be non-negative, got ",
                clip_value);
  for (const Tensor& param : params) {
    Tensor grad = owned_grad(param);
    if (!grad.defined()) continue;
    NoGradGuard no_grad;
    grad.copy_(clamp(grad, -clip_value, clip_value));
  }
}

}  // namespace tessera::optim
