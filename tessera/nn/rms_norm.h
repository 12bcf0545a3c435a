#pragma once

#include <optional>

#include "tessera/nn/module.h"

namespace tessera::nn {

// x / sqrt(mean(x^2) + eps) over the trailing `normalized_shape` dims, times
// weight (ones), as torch.nn.RMSNorm; eps defaults to the dtype's epsilon.
class RMSNorm : public Module {
 public:
  explicit RMSNorm(Shape normalized_shape, std::optional<double> eps = std::nullopt,
                   bool elementwise_affine = true);
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;

  Tensor weight;  // undefined without elementwise_affine

 private:
  Shape normalized_shape_;
  std::optional<double> eps_;
};

}  // namespace tessera::nn
