#pragma once

// 2-D convolution (cross-correlation, as torch.nn.functional.conv2d) and its
// gradients as ops of their own.

#include <vector>

#include "tessera/core/tensor.h"

namespace tessera {

// x [N, C, H, W] with weight [O, C / groups, kh, kw] and optional bias [O];
// stride, padding and dilation are (height, width) pairs.
Tensor conv2d(const Tensor& x, const Tensor& weight, const Tensor& bias = {},
              const std::vector<int64_t>& stride = {1, 1},
              const std::vector<int64_t>& padding = {0, 0},
              const std::vector<int64_t>& dilation = {1, 1}, int64_t groups = 1);
// The same with one value for both spatial dims.
Tensor conv2d(const Tensor& x, const Tensor& weight, const Tensor& bias, int64_t stride,
              int64_t padding = 0, int64_t dilation = 1, int64_t groups = 1);

// Gradient of conv2d with respect to x, for an input of spatial size input_hw.
Tensor conv2d_backward_input(const Tensor& grad_output, const Tensor& weight,
                             const std::vector<int64_t>& input_hw,
                             const std::vector<int64_t>& stride,
                             const std::vector<int64_t>& padding,
                             const std::vector<int64_t>& dilation, int64_t groups);
// Gradient of conv2d with respect to a weight of spatial size kernel_hw.
Tensor conv2d_backward_weight(const Tensor& x, const Tensor& grad_output,
                              const std::vector<int64_t>& kernel_hw,
                              const std::vector<int64_t>& stride,
                              const std::vector<int64_t>& padding,
                              const std::vector<int64_t>& dilation, int64_t groups);

}  // namespace tessera
