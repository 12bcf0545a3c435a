#pragma once

#include "tessera/nn/module.h"

namespace tessera::nn {

// Group normalisation of [N, C, *] input, as torch.nn.GroupNorm: the C
// channels (divisible by num_groups) form num_groups groups normalised per
// sample, then weight (ones) and bias (zeros) apply per channel.
class GroupNorm : public Module {
 public:
  GroupNorm(int64_t num_groups, int64_t num_channels, double eps = 1e-5, bool affine = true);
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;

  Tensor weight;  // undefined without affine
  Tensor bias;    // undefined without affine

 private:
  int64_t num_groups_;
  int64_t num_channels_;
  double eps_;
};

}  // namespace tessera::nn
