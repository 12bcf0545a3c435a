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
void for_each_value(Tensor& global_grad, Fn&& fn) {
  // A global gradient is visited shard by shard; see across_shards.
  Tensor grad = global_grad.local_shard();
  if (!grad.defined()) return;
  if (grad.dtype() == DType::f32) {
    float* data = grad.data<float>();
    for (int64_t i = 0; i < grad.numel(); ++i) fn(data[i]);
  } else {
    double* data = grad.data<double>();
    for (int64_t i = 0; i < grad.numel(); ++i) fn(data[i]);
  }
}

// Combines a quantity every rank computed over its shard of a global tensor
// into the value for the whole tensor: the sum (each piece counted once,
// however many ranks hold a copy) or the max.
double across_shards(const Tensor& global, double local_value, bool max) {
  const Placement placement = global.placement();
  const NdSbp& sbp = global.nd_sbp();
  double copies = 1;
  for (int a = 0; a < sbp.ndim(); ++a) {
    if (!sbp[a].is_split()) copies *= static_cast<double>(placement.mesh()[static_cast<size_t>(a)]);
  }
  const auto ndim = static_cast<size_t>(sbp.ndim());
  NdSbp partial(std::vector<Sbp>(ndim, max ? Sbp::partial_max() : Sbp::partial_sum()));
  NdSbp broadcast(std::vector<Sbp>(ndim, Sbp::broadcast()));
  Tensor value = Tensor::scalar(max ? local_value : local_value / copies, DType::f64);
  return value.to_global(placement, partial).to_global(placement, broadcast).local_shard()
      .item<double>();
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
    double own = 0.0;
    for_each_value(grad, [&](auto value) {
      const double magnitude = std::abs(static_cast<double>(value));
      if (infinity) {
        // NaN must win over any number, so the result reports it.
        own = std::isnan(magnitude) ? magnitude : std::max(own, magnitude);
      } else if (norm_type == 2.0) {
        own += magnitude * magnitude;
      } else {
        own += std::pow(magnitude, norm_type);
      }
    });
    if (grad.is_global()) own = across_shards(grad, own, infinity);
    accumulated = infinity ? (std::isnan(own) ? own : std::max(accumulated, own)) : accumulated + own;
  }
  const double total = infinity           ? accumulated
                       : norm_type == 2.0 ? std::sqrt(accumulated)
                                          : std::pow(accumulated, 1.0 / norm_type);
  TESSERA_CHECK(!error_if_nonfinite || std::isfinite(total), "[clip_grad_norm_] the total ",
                norm_type, "-norm of the gradients is ", total,
                "; pass error_if_nonfinite=false to scale anyway");
  const double scale = max_norm / (total + 1e-6);
  if (scale < 1.0) {
    for (Tensor& grad : grads) {
      grad.bump_version();  // written in place
      for_each_value(grad, [&](auto& value) {
        value = static_cast<std::remove_reference_t<decltype(value)>>(value * scale);
      });
    }
  }
  return total;
}

void clip_grad_value_(const std::vector<Tensor>& params, double clip_value) {
  TESSERA_CHECK(clip_value >= 0.0, "[clip_grad_value_] clip_value must be non-negative, got ",
                clip_value);
  for (const Tensor& param : params) {
    Tensor grad = owned_grad(param);
    if (!grad.defined()) continue;
    grad.bump_version();  // written in place
    for_each_value(grad, [&](auto& value) {
      using T = std::remove_reference_t<decltype(value)>;
      value = std::clamp(value, static_cast<T>(-clip_value), static_cast<T>(clip_value));
    });
  }
}

}  // namespace tessera::optim
