#pragma once

#include "tessera/optim/optimizer.h"

namespace tessera::optim {

struct AdamOptions {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.0;

  bool operator==(const AdamOptions&) const = default;
};

// Adam (Kingma & Ba) with PyTorch's update rule; weight_decay adds
// weight_decay * p to the gradient (L2). For decoupled decay use AdamW.
class Adam : public OptimizerWithOptions<AdamOptions> {
 public:
  Adam(const std::vector<Tensor>& params, const AdamOptions& options = {});
  // From model->named_parameters(): errors name the parameters.
  template <NamedParameterList Named>
  Adam(const Named& params, const AdamOptions& options = {}) : Adam("Adam", false) {
    add_param_group(params, options);
  }
  void step() override;

 protected:
  // An optimizer without groups yet; the constructor adds the first.
  Adam(std::string name, bool decoupled_weight_decay);
  void validate(const AdamOptions& options) const override;

 private:
  bool decoupled_weight_decay_;
};

struct AdamWOptions {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 1e-2;
};

// AdamW (Loshchilov & Hutter): Adam whose weight decay shrinks the
// parameters directly, p *= 1 - lr * weight_decay, before the Adam step.
class AdamW : public Adam {
 public:
  AdamW(const std::vector<Tensor>& params, const AdamWOptions& options = {});
  // From model->named_parameters(): errors name the parameters.
  template <NamedParameterList Named>
  AdamW(const Named& params, const AdamWOptions& options = {}) : Adam("AdamW", true) {
    add_param_group(params, to_adam_options(options));
  }

 private:
  static AdamOptions to_adam_options(const AdamWOptions& options);
};

}  // namespace tessera::optim
