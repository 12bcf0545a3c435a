// CPU kernels of the fused optimizer updates (ops/optimizer_steps.cpp): one
// parallel pass over the parameter, its gradient and its state.

#include <cmath>

#include "tessera/core/thread_pool.h"
#include "tessera/ops/op.h"

namespace tessera::cpu {

namespace {

template <typename T>
void sgd_update(T* param, const T* grad, T* buffer, int64_t count, const Attrs& attrs) {
  const T lr = static_cast<T>(attrs.f("lr")), momentum = static_cast<T>(attrs.f("momentum"));
  const T decay = static_cast<T>(attrs.f("weight_decay"));
  const T keep = static_cast<T>(1.0 - attrs.f("dampening"));
  const bool nesterov = attrs.b("nesterov"), first_step = attrs.b("first_step");
  parallel_for(0, count, kElementwiseGrain, [&](int64_t begin, int64_t end) {
    if (buffer == nullptr) {
      for (int64_t i = begin; i < end; ++i) param[i] -= lr * (grad[i] + decay * param[i]);
      return;
    }
    for (int64_t i = begin; i < end; ++i) {
      const T g = grad[i] + decay * param[i];
      const T b = first_step ? g : momentum * buffer[i] + keep * g;
      buffer[i] = b;
      param[i] -= lr * (nesterov ? g + momentum * b : b);
    }
  });
}

// inputs {param, grad[, momentum_buffer]}
void sgd_kernel(KernelContext& ctx) {
  const Tensor& param = ctx.inputs[0];
  const Tensor* buffer = ctx.inputs.size() > 2 ? &ctx.inputs[2] : nullptr;
  if (param.dtype() == DType::f32) {
    sgd_update(param.data<float>(), ctx.inputs[1].data<float>(),
               buffer ? buffer->data<float>() : nullptr, param.numel(), ctx.attrs);
  } else {
    sgd_update(param.data<double>(), ctx.inputs[1].data<double>(),
               buffer ? buffer->data<double>() : nullptr, param.numel(), ctx.attrs);
  }
}

template <typename T>
void adam_update(T* param, const T* grad, T* exp_avg, T* exp_avg_sq, int64_t count,
                 const Attrs& attrs) {
  const double lr = attrs.f("lr"), weight_decay = attrs.f("weight_decay");
  const auto step = static_cast<double>(attrs.i("step"));
  const double bias_correction1 = 1.0 - std::pow(attrs.f("beta1"), step);
  const double bias_correction2 = 1.0 - std::pow(attrs.f("beta2"), step);
  const bool decoupled = attrs.b("decoupled");
  const T beta1 = static_cast<T>(attrs.f("beta1")), beta2 = static_cast<T>(attrs.f("beta2"));
  const T decay = static_cast<T>(weight_decay);
  const T shrink = static_cast<T>(1.0 - lr * weight_decay);
  const T step_size = static_cast<T>(lr / bias_correction1);
  const T inv_sqrt_bc2 = static_cast<T>(1.0 / std::sqrt(bias_correction2));
  const T eps = static_cast<T>(attrs.f("eps"));
  parallel_for(0, count, kElementwiseGrain, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      T g = grad[i];
      T p = param[i];
      if (decoupled) {
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

// inputs {param, grad, exp_avg, exp_avg_sq}
void adam_kernel(KernelContext& ctx) {
  const std::vector<Tensor>& in = ctx.inputs;
  if (in[0].dtype() == DType::f32) {
    adam_update(in[0].data<float>(), in[1].data<float>(), in[2].data<float>(), in[3].data<float>(),
                in[0].numel(), ctx.attrs);
  } else {
    adam_update(in[0].data<double>(), in[1].data<double>(), in[2].data<double>(),
                in[3].data<double>(), in[0].numel(), ctx.attrs);
  }
}

}  // namespace

TESSERA_REGISTER_KERNEL("sgd_step", cpu, sgd_kernel, DType::f32, DType::f64);
TESSERA_REGISTER_KERNEL("sgd_momentum_step", cpu, sgd_kernel, DType::f32, DType::f64);
TESSERA_REGISTER_KERNEL("adam_step", cpu, adam_kernel, DType::f32, DType::f64);

}  // namespace tessera::cpu
