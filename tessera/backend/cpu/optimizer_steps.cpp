// CPU kernels of the fused optimizer updates (ops/optimizer_steps.cpp): one
// parallel pass over the parameter, its gradient and its state.

#include <cmath>

#include "tessera/core/thread_pool.h"
#include "tessera/ops/op.h"

namespace tessera::cpu {

namespace {

// The scalars of an SGD update. Chunks get them by value and their arrays
// as restrict parameters (an update's inputs are distinct tensors,
// ops/dispatch.cpp): through a lambda's captures the compiler must reload
// every scalar after each store, and the loop does not vectorise.
template <typename T>
struct SgdScalars {
  T lr, momentum, decay, keep;
};

template <typename T>
void sgd_chunk(T* __restrict param, const T* __restrict grad, int64_t count,
               const SgdScalars<T> s) {
  for (int64_t i = 0; i < count; ++i) param[i] -= s.lr * (grad[i] + s.decay * param[i]);
}

// One loop per variant, so none branches per element.
template <typename T, bool first_step, bool nesterov>
void sgd_momentum_chunk(T* __restrict param, const T* __restrict grad, T* __restrict buffer,
                        int64_t count, const SgdScalars<T> s) {
  for (int64_t i = 0; i < count; ++i) {
    const T g = grad[i] + s.decay * param[i];
    const T b = first_step ? g : s.momentum * buffer[i] + s.keep * g;
    buffer[i] = b;
    param[i] -= s.lr * (nesterov ? g + s.momentum * b : b);
  }
}

template <typename T>
void sgd_update(T* param, const T* grad, T* buffer, int64_t count, const Attrs& attrs) {
  const SgdScalars<T> s{static_cast<T>(attrs.f("lr")), static_cast<T>(attrs.f("momentum")),
                        static_cast<T>(attrs.f("weight_decay")),
                        static_cast<T>(1.0 - attrs.f("dampening"))};
  const bool nesterov = attrs.b("nesterov"), first_step = attrs.b("first_step");
  auto chunk =
      first_step
          ? (nesterov ? sgd_momentum_chunk<T, true, true> : sgd_momentum_chunk<T, true, false>)
          : (nesterov ? sgd_momentum_chunk<T, false, true> : sgd_momentum_chunk<T, false, false>);
  parallel_for(0, count, kElementwiseGrain, [&](int64_t begin, int64_t end) {
    if (buffer == nullptr) {
      sgd_chunk(param + begin, grad + begin, end - begin, s);
    } else {
      chunk(param + begin, grad + begin, buffer + begin, end - begin, s);
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

// The scalars of an Adam update, for its chunks (as SgdScalars).
template <typename T>
struct AdamScalars {
  T decay, shrink, beta1, beta2, step_size, inv_sqrt_bc2, eps;
};

template <typename T>
void adam_chunk(T* __restrict param, const T* __restrict grad, T* __restrict exp_avg,
                T* __restrict exp_avg_sq, int64_t count, const AdamScalars<T> s) {
  for (int64_t i = 0; i < count; ++i) {
    const T g = grad[i] + s.decay * param[i];
    const T m = s.beta1 * exp_avg[i] + (1 - s.beta1) * g;
    const T v = s.beta2 * exp_avg_sq[i] + (1 - s.beta2) * g * g;
    exp_avg[i] = m;
    exp_avg_sq[i] = v;
    param[i] = param[i] * s.shrink - s.step_size * m / (std::sqrt(v) * s.inv_sqrt_bc2 + s.eps);
  }
}

template <typename T>
void adam_update(T* param, const T* grad, T* exp_avg, T* exp_avg_sq, int64_t count,
                 const Attrs& attrs) {
  const double lr = attrs.f("lr"), weight_decay = attrs.f("weight_decay");
  const auto step = static_cast<double>(attrs.i("step"));
  const double bias_correction1 = 1.0 - std::pow(attrs.f("beta1"), step);
  const double bias_correction2 = 1.0 - std::pow(attrs.f("beta2"), step);
  // Decoupled decay (AdamW) shrinks the parameter; coupled decay (Adam)
  // adds to the gradient. One of the two is the identity, so the loop has
  // no branch and vectorises.
  const bool decoupled = attrs.b("decoupled");
  const T beta1 = static_cast<T>(attrs.f("beta1")), beta2 = static_cast<T>(attrs.f("beta2"));
  const T decay = decoupled ? T(0) : static_cast<T>(weight_decay);
  const T shrink = decoupled ? static_cast<T>(1.0 - lr * weight_decay) : T(1);
  const T step_size = static_cast<T>(lr / bias_correction1);
  const T inv_sqrt_bc2 = static_cast<T>(1.0 / std::sqrt(bias_correction2));
  const T eps = static_cast<T>(attrs.f("eps"));
  parallel_for(0, count, kElementwiseGrain, [&](int64_t begin, int64_t end) {
    adam_chunk(param + begin, grad + begin, exp_avg + begin, exp_avg_sq + begin, end - begin,
               {decay, shrink, beta1, beta2, step_size, inv_sqrt_bc2, eps});
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
