#pragma once

#include "tessera/nn/module.h"

namespace tessera::nn {

// In training, zeroes each element with probability p and scales the rest by
// 1 / (1 - p); in eval, the identity. As torch.nn.Dropout.
class Dropout : public Module {
 public:
  explicit Dropout(double p = 0.5);
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override { return str_cat("p=", p_); }

 private:
  double p_;
};

}  // namespace tessera::nn
