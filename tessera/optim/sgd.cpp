#include "tessera/optim/sgd.h"

#include "tessera/core/thread_pool.h"
#include "tessera/ops/creation.h"

namespace tessera::optim {
namespace {

template <typename T>
void sgd_update(T* param, const T* grad, T* buffer, int64_t count, const SGDOptions& options,
                bool first_step) {
  const T lr = static_cast<T>(options.lr), momentum = static_cast<T>(options.momentum);
  const T decay = static_cast<T>(options.weight_decay);
  const T keep = static_cast<T>(1.0 - options.dampening);
  parallel_for(0, count, kElementwiseGrain, [&](int64_t begin, int64_t end) {
    if (buffer == nullptr) {
      for (int64_t i = begin; i < end; ++i) param[i] -= lr * (grad[i] + decay * param[i]);
      return;
    }
    for (int64_t i = begin; i < end; ++i) {
      const T g = grad[i] + decay * param[i];
      const T b = first_step ? g : momentum * buffer[i] + keep * g;
      buffer[i] = b;
      param[i] -= lr * (options.nesterov ? g + momentum * b : b);
    }
  });
}

}  // namespace

SGD::SGD(const std::vector<Tensor>& params, const SGDOptions& options)
    : OptimizerWithOptions("SGD") {
  add_param_group(params, options);
}

void SGD::validate(const SGDOptions& options) const {
  TESSERA_CHECK(options.lr >= 0.0 && options.momentum >= 0.0 && options.weight_decay >= 0.0,
                "[SGD] lr, momentum and weight_decay must be non-negative, got lr=", options.lr,
                ", momentum=", options.momentum, ", weight_decay=", options.weight_decay);
  TESSERA_CHECK(!options.nesterov || (options.momentum > 0.0 && options.dampening == 0.0),
                "[SGD] nesterov needs momentum > 0 and dampening = 0, got momentum=",
                options.momentum, ", dampening=", options.dampening);
}

void SGD::step() {
  for (size_t group = 0; group < num_param_groups(); ++group) {
    const SGDOptions& opts = options(group);
    size_t index = first_index(group);
    for (const Tensor& global_param : param_group(group)) {
      ParamState& state = this->state(index++);
      Tensor grad = dense_grad(global_param);
      if (!grad.defined()) continue;
      const Tensor param = global_param.local_shard();
      const bool first_step = state.step == 0;
      Tensor buffer;
      if (opts.momentum != 0.0) {
        auto [it, inserted] = state.buffers.try_emplace("momentum_buffer");
        if (inserted || !it->second.defined()) it->second = zeros_like(global_param);
        buffer = it->second.local_shard();
      }
      ++state.step;
      // Autograd must see that the parameter changed (see Tensor::version).
      param.bump_version();
      if (buffer.defined()) buffer.bump_version();
      if (param.dtype() == DType::f32) {
        sgd_update(param.data<float>(), grad.data<float>(),
                   buffer.defined() ? buffer.data<float>() : nullptr, param.numel(), opts,
                   first_step);
      } else if (param.dtype() == DType::f64) {
        sgd_update(param.data<double>(), grad.data<double>(),
                   buffer.defined() ? buffer.data<double>() : nullptr, param.numel(), opts,
                   first_step);
      } else {
        TESSERA_FAIL("[SGD] no update kernel for dtype ", dtype_name(param.dtype()),
                     "; parameters must be f32 or f64");
      }
    }
  }
}

}  // namespace tessera::optim
