#include "tessera/optim/adam.h"

#include <cmath>

#include "tessera/core/thread_pool.h"
#include "tessera/ops/creation.h"

namespace tessera::optim {
namespace {

struct AdamStep {
  double lr, beta1, beta2, eps, weight_decay;
  double bias_correction1, bias_correction2;
  bool decoupled;
};

template <typename T>
void adam_update(T* param, const T* grad, T* exp_avg, T* exp_avg_sq, int64_t count,
                 const AdamStep& s) {
  const T beta1 = static_cast<T>(s.beta1), beta2 = static_cast<T>(s.beta2);
  const T decay = static_cast<T>(s.weight_decay);
  const T shrink = static_cast<T>(1.0 - s.lr * s.weight_decay);
  const T step_size = static_cast<T>(s.lr / s.bias_correction1);
  const T inv_sqrt_bc2 = static_cast<T>(1.0 / std::sqrt(s.bias_correction2));
  const T eps = static_cast<T>(s.eps);
  parallel_for(0, count, kElementwiseGrain, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      T g = grad[i];
      T p = param[i];
      if (s.decoupled) {
        p *= shrink;
      } else {
        g += decay * p;
      }
      const T m = beta1 * exp_avg[i] + (1 - beta1) * g;
      const T v = beta2 * exp_avg_sq[i] + (1 - beta2) * g * g;
      exp_avg[i] = m;
      exp_avg_sq[i] = v;
      param[i] = p - step_size * m / (std::sqrt(v) * inv_sqrt_bc2 + eps);
    }
  });
}

}  // namespace

Adam::Adam(const std::vector<Tensor>& params, const AdamOptions& options) : Adam("Adam", false) {
  add_param_group(params, options);
}

Adam::Adam(std::string name, bool decoupled_weight_decay)
    : OptimizerWithOptions(std::move(name)), decoupled_weight_decay_(decoupled_weight_decay) {}

void Adam::validate(const AdamOptions& options) const {
  TESSERA_CHECK(options.lr >= 0.0 && options.eps >= 0.0 && options.weight_decay >= 0.0, "[",
                name(), "] lr, eps and weight_decay must be non-negative, got lr=", options.lr,
                ", eps=", options.eps, ", weight_decay=", options.weight_decay);
  TESSERA_CHECK(options.beta1 >= 0.0 && options.beta1 < 1.0 && options.beta2 >= 0.0 &&
                    options.beta2 < 1.0,
                "[", name(), "] betas must be in [0, 1), got beta1=", options.beta1,
                ", beta2=", options.beta2);
}

void Adam::step() {
  for (size_t group = 0; group < num_param_groups(); ++group) {
    const AdamOptions& opts = options(group);
    size_t index = first_index(group);
    for (const Tensor& global_param : param_group(group)) {
      ParamState& state = this->state(index++);
      Tensor grad = dense_grad(global_param);
      if (!grad.defined()) continue;
      const Tensor param = global_param.local_shard();
      // Moments share the parameter's layout; the update runs on shards.
      Tensor& global_exp_avg = state.buffers["exp_avg"];
      Tensor& global_exp_avg_sq = state.buffers["exp_avg_sq"];
      if (!global_exp_avg.defined()) global_exp_avg = zeros_like(global_param);
      if (!global_exp_avg_sq.defined()) global_exp_avg_sq = zeros_like(global_param);
      Tensor exp_avg = global_exp_avg.local_shard();
      Tensor exp_avg_sq = global_exp_avg_sq.local_shard();
      const int64_t step = ++state.step;
      const AdamStep s{opts.lr,
                       opts.beta1,
                       opts.beta2,
                       opts.eps,
                       opts.weight_decay,
                       1.0 - std::pow(opts.beta1, static_cast<double>(step)),
                       1.0 - std::pow(opts.beta2, static_cast<double>(step)),
                       decoupled_weight_decay_};
      // Autograd must see that the parameter changed (see Tensor::version).
      for (const Tensor& written : {param, exp_avg, exp_avg_sq}) written.bump_version();
      if (param.dtype() == DType::f32) {
        adam_update(param.data<float>(), grad.data<float>(), exp_avg.data<float>(),
                    exp_avg_sq.data<float>(), param.numel(), s);
      } else if (param.dtype() == DType::f64) {
        adam_update(param.data<double>(), grad.data<double>(), exp_avg.data<double>(),
                    exp_avg_sq.data<double>(), param.numel(), s);
      } else {
        TESSERA_FAIL("[", name(), "] no update kernel for dtype ", dtype_name(param.dtype()),
                     "; parameters must be f32 or f64");
      }
    }
  }
}

AdamW::AdamW(const std::vector<Tensor>& params, const AdamWOptions& options)
    : Adam("AdamW", true) {
  add_param_group(params, to_adam_options(options));
}

AdamOptions AdamW::to_adam_options(const AdamWOptions& options) {
  return {options.lr, options.beta1, options.beta2, options.eps, options.weight_decay};
}

}  // namespace tessera::optim
