#pragma once

#include <vector>

#include "tessera/nn/conv_options.h"
#include "tessera/nn/module.h"

namespace tessera::nn {

// 2-D convolution over [N, C, H, W] input, as torch.nn.Conv2d. weight is
// [out_channels, in_channels / groups, kh, kw]; weight and bias start as
// U(-1/sqrt(fan_in), 1/sqrt(fan_in)), PyTorch's default.
class Conv2d : public Module {
 public:
  Conv2d(int64_t in_channels, int64_t out_channels, int64_t kernel_size, int64_t stride = 1,
         int64_t padding = 0, int64_t dilation = 1, int64_t groups = 1, bool bias = true);
  Conv2d(int64_t in_channels, int64_t out_channels, std::vector<int64_t> kernel_size,
         std::vector<int64_t> stride = {1, 1}, std::vector<int64_t> padding = {0, 0},
         std::vector<int64_t> dilation = {1, 1}, int64_t groups = 1, bool bias = true);
  // Arguments by name: Conv2d(Conv2dOptions(3, 64, 3).stride(2).bias(false)).
  explicit Conv2d(const Conv2dOptions& options);
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;

  Tensor weight;
  Tensor bias;  // undefined when built without bias

 private:
  int64_t in_channels_;
  int64_t out_channels_;
  std::vector<int64_t> kernel_size_, stride_, padding_, dilation_;
  int64_t groups_;
};

}  // namespace tessera::nn
