#pragma once

#include <vector>

#include "tessera/nn/conv_options.h"
#include "tessera/nn/module.h"

namespace tessera::nn {

// Transposed 2-D convolution over [N, C, H, W] (or [C, H, W]) input, as
// torch.nn.ConvTranspose2d. weight is [in_channels, out_channels / groups,
// kh, kw]; weight and bias start as U(-1/sqrt(fan_in), 1/sqrt(fan_in)) with
// PyTorch's fan_in for this layout, out_channels / groups * kh * kw.
class ConvTranspose2d : public Module {
 public:
  ConvTranspose2d(int64_t in_channels, int64_t out_channels, int64_t kernel_size,
                  int64_t stride = 1, int64_t padding = 0, int64_t output_padding = 0,
                  int64_t groups = 1, bool bias = true, int64_t dilation = 1);
  // Arguments by name, with (height, width) pairs where they differ:
  // ConvTranspose2d(ConvTranspose2dOptions(64, 3, 4).stride(2).padding(1)).
  explicit ConvTranspose2d(const ConvTranspose2dOptions& options);
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;

  Tensor weight;
  Tensor bias;  // undefined when built without bias

 private:
  ConvTranspose2dOptions options_;
};

}  // namespace tessera::nn
