#include "tessera/optim/sgd.h"

#include "tessera/core/grad_mode.h"
#include "tessera/ops/creation.h"
#include "tessera/ops/optimizer_steps.h"

namespace tessera::optim {
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
  bool momentum = false;
  for (size_t group = 0; group < num_param_groups(); ++group) {
    momentum = momentum || options(group).momentum != 0;
  }
  if (skip_update(momentum ? 1 : 0)) return;  // momentum_buffer
  NoGradGuard no_grad;
  for (size_t group = 0; group < num_param_groups(); ++group) {
    const SGDOptions& opts = options(group);
    record_options_for_graph(group);
    size_t index = first_index(group);
    for (const Tensor& param : param_group(group)) {
      ParamState& state = this->state(index++);
      Tensor grad = dense_grad(param);
      if (!grad.defined()) continue;
      Tensor buffer;
      if (opts.momentum != 0.0) {
        auto [it, inserted] = state.buffers.try_emplace("momentum_buffer");
        if (inserted || !it->second.defined()) it->second = zeros_like(param);
        buffer = it->second;
      }
      sgd_step_(param, grad, buffer,
                {.lr = opts.lr,
                 .momentum = opts.momentum,
                 .dampening = opts.dampening,
                 .weight_decay = opts.weight_decay,
                 .nesterov = opts.nesterov,
                 .first_step = state.step == 0});
      ++state.step;
      record_step_for_graph(index - 1);
      record_lr_for_graph(group);
    }
  }
}

}  // namespace tessera::optim
