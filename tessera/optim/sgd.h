#pragma once

#include "tessera/optim/optimizer.h"

namespace tessera::optim {

struct SGDOptions {
  double lr = 0.01;
  double momentum = 0.0;
  double dampening = 0.0;
  double weight_decay = 0.0;
  bool nesterov = false;

  bool operator==(const SGDOptions&) const = default;
};

// Stochastic gradient descent with PyTorch's update rule:
//   g = grad + weight_decay * p
//   b = g (first step) or momentum * b + (1 - dampening) * g
//   p -= lr * (nesterov ? g + momentum * b : b)
class SGD : public OptimizerWithOptions<SGDOptions> {
 public:
  SGD(const std::vector<Tensor>& params, const SGDOptions& options = {});
  // From model->named_parameters(): errors name the parameters.
  template <NamedParameterList Named>
  SGD(const Named& params, const SGDOptions& options = {}) : OptimizerWithOptions("SGD") {
    add_param_group(params, options);
  }
  void step() override;

 protected:
  void validate(const SGDOptions& options) const override;
};

}  // namespace tessera::optim
