#pragma once

#include "tessera/nn/module.h"

namespace tessera::nn {

// y = x W^T + b over the last dim of x (any leading dims), as torch.nn.Linear.
// weight is [out_features, in_features]; both weight and bias start as
// U(-1/sqrt(in), 1/sqrt(in)), PyTorch's default.
class Linear : public Module {
 public:
  Linear(int64_t in_features, int64_t out_features, bool bias = true);
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;

  Tensor weight;
  Tensor bias;  // undefined when built without bias

 private:
  int64_t in_features_;
  int64_t out_features_;
};

}  // namespace tessera::nn
