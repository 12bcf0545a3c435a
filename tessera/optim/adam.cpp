#include "tessera/optim/adam.h"

#include "tessera/core/grad_mode.h"
#include "tessera/ops/creation.h"
#include "tessera/ops/optimizer_steps.h"

namespace tessera::optim {
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
  if (skip_update(2)) return;  // exp_avg, exp_avg_sq
  NoGradGuard no_grad;
  for (size_t group = 0; group < num_param_groups(); ++group) {
    const AdamOptions& opts = options(group);
    record_options_for_graph(group);
    size_t index = first_index(group);
    for (const Tensor& param : param_group(group)) {
      ParamState& state = this->state(index++);
      Tensor grad = dense_grad(param);
      if (!grad.defined()) continue;
      // The moments share the parameter's layout.
      Tensor& exp_avg = state.buffers["exp_avg"];
      Tensor& exp_avg_sq = state.buffers["exp_avg_sq"];
      if (!exp_avg.defined()) exp_avg = zeros_like(param);
      if (!exp_avg_sq.defined()) exp_avg_sq = zeros_like(param);
      adam_step_(param, grad, exp_avg, exp_avg_sq,
                 {.lr = opts.lr,
                  .beta1 = opts.beta1,
                  .beta2 = opts.beta2,
                  .eps = opts.eps,
                  .weight_decay = opts.weight_decay,
                  .decoupled_weight_decay = decoupled_weight_decay_,
                  .step = state.step + 1});
      ++state.step;  // after the update: an update that raises leaves the count
      record_step_for_graph(index - 1);
      // A graph's run reads the count it advances (the bias correction).
      if (mode_active()) {
        record_attr_refresh(
            [this, i = index - 1](Attrs& attrs) { attrs.set("step", this->state(i).step + 1); });
      }
      record_lr_for_graph(group);
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
