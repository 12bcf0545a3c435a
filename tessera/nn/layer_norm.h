#pragma once

#include "tessera/nn/module.h"

namespace tessera::nn {

// Normalises over the trailing `normalized_shape` dims, then scales by weight
// (ones) and shifts by bias (zeros), as torch.nn.LayerNorm.
class LayerNorm : public Module {
 public:
  explicit LayerNorm(Shape normalized_shape, double eps = 1e-5, bool elementwise_affine = true,
                     bool bias = true);
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;

  Tensor weight;  // undefined without elementwise_affine
  Tensor bias;    // undefined without elementwise_affine or bias

 private:
  Shape normalized_shape_;
  double eps_;
};

}  // namespace tessera::nn
