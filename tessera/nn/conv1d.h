#pragma once

#include <vector>

#include "tessera/nn/conv_options.h"
#include "tessera/nn/module.h"

namespace tessera::nn {

// 1-D convolution over [N, C, L] (or unbatched [C, L]) input, as
// torch.nn.Conv1d. weight is [out_channels, in_channels / groups, k];
// weight and bias start as U(-1/sqrt(fan_in), 1/sqrt(fan_in)), with fan_in
// = in_channels / groups * k, PyTorch's default.
class Conv1d : public Module {
 public:
  Conv1d(int64_t in_channels, int64_t out_channels, int64_t kernel_size, int64_t stride = 1,
         int64_t padding = 0, int64_t dilation = 1, int64_t groups = 1, bool bias = true);
  // Arguments by name: Conv1d(Conv1dOptions(16, 32, 5).padding(2).bias(false)).
  explicit Conv1d(const Conv1dOptions& options);
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;

  Tensor weight;
  Tensor bias;  // undefined when built without bias

 private:
  int64_t in_channels_;
  int64_t out_channels_;
  int64_t kernel_size_, stride_, padding_, dilation_, groups_;
};

}  // namespace tessera::nn
