#pragma once

// Convolution (cross-correlation, as torch.nn.functional.conv1d/2d/3d), its
// transposes, and conv2d's gradients as ops of their own. Inputs may be
// batched ([N, C, ...]) or not ([C, ...]).

#include <string>
#include <type_traits>
#include <vector>

#include "tessera/core/tensor.h"

namespace tessera {

// PyTorch's string padding: "valid" (none) or "same" (the output keeps the
// input's size; stride 1 only; an odd total padding puts the extra element
// after, as PyTorch does). Built from a string, never from numbers.
struct ConvPadding {
  std::string mode;
  template <typename S, std::enable_if_t<std::is_constructible_v<std::string, const S&>, int> = 0>
  ConvPadding(const S& name) : mode(name) {}  // NOLINT(google-explicit-constructor)
};

// x [N, C, H, W] (or [C, H, W]) with weight [O, C / groups, kh, kw] and optional bias [O];
// stride, padding and dilation are (height, width) pairs.
Tensor conv2d(const Tensor& x, const Tensor& weight, const Tensor& bias = {},
              const std::vector<int64_t>& stride = {1, 1},
              const std::vector<int64_t>& padding = {0, 0},
              const std::vector<int64_t>& dilation = {1, 1}, int64_t groups = 1);
// The same with one value for both spatial dims.
Tensor conv2d(const Tensor& x, const Tensor& weight, const Tensor& bias, int64_t stride,
              int64_t padding = 0, int64_t dilation = 1, int64_t groups = 1);
// conv2d with padding "same" or "valid".
Tensor conv2d(const Tensor& x, const Tensor& weight, const Tensor& bias,
              const std::vector<int64_t>& stride, const ConvPadding& padding,
              const std::vector<int64_t>& dilation = {1, 1}, int64_t groups = 1);
Tensor conv2d(const Tensor& x, const Tensor& weight, const Tensor& bias, int64_t stride,
              const ConvPadding& padding, int64_t dilation = 1, int64_t groups = 1);

// 1-D convolution: x [N, C, L] or [C, L], weight [O, C / groups, k], bias [O];
// computed as conv2d over a height of one.
Tensor conv1d(const Tensor& x, const Tensor& weight, const Tensor& bias = {},
              const std::vector<int64_t>& stride = {1}, const std::vector<int64_t>& padding = {0},
              const std::vector<int64_t>& dilation = {1}, int64_t groups = 1);
Tensor conv1d(const Tensor& x, const Tensor& weight, const Tensor& bias, int64_t stride,
              int64_t padding = 0, int64_t dilation = 1, int64_t groups = 1);
Tensor conv1d(const Tensor& x, const Tensor& weight, const Tensor& bias,
              const std::vector<int64_t>& stride, const ConvPadding& padding,
              const std::vector<int64_t>& dilation = {1}, int64_t groups = 1);
Tensor conv1d(const Tensor& x, const Tensor& weight, const Tensor& bias, int64_t stride,
              const ConvPadding& padding, int64_t dilation = 1, int64_t groups = 1);

// 3-D convolution: x [N, C, D, H, W] or [C, D, H, W], weight
// [O, C / groups, kd, kh, kw], bias [O]; (depth, height, width) triples.
// Computed as a sum over the kernel's depth of conv2d on depth slices.
Tensor conv3d(const Tensor& x, const Tensor& weight, const Tensor& bias = {},
              const std::vector<int64_t>& stride = {1, 1, 1},
              const std::vector<int64_t>& padding = {0, 0, 0},
              const std::vector<int64_t>& dilation = {1, 1, 1}, int64_t groups = 1);
Tensor conv3d(const Tensor& x, const Tensor& weight, const Tensor& bias, int64_t stride,
              int64_t padding = 0, int64_t dilation = 1, int64_t groups = 1);
Tensor conv3d(const Tensor& x, const Tensor& weight, const Tensor& bias,
              const std::vector<int64_t>& stride, const ConvPadding& padding,
              const std::vector<int64_t>& dilation = {1, 1, 1}, int64_t groups = 1);
Tensor conv3d(const Tensor& x, const Tensor& weight, const Tensor& bias, int64_t stride,
              const ConvPadding& padding, int64_t dilation = 1, int64_t groups = 1);

// Transposed 2-D convolution (the gradient of conv2d with respect to its
// input): x [N, C_in, H, W] or [C_in, H, W], weight [C_in, C_out / groups,
// kh, kw], bias [C_out]. Output size (H - 1) * stride - 2 * padding +
// dilation * (kh - 1) + output_padding + 1; output_padding must be smaller
// than the stride or the dilation.
Tensor conv_transpose2d(const Tensor& x, const Tensor& weight, const Tensor& bias = {},
                        const std::vector<int64_t>& stride = {1, 1},
                        const std::vector<int64_t>& padding = {0, 0},
                        const std::vector<int64_t>& output_padding = {0, 0}, int64_t groups = 1,
                        const std::vector<int64_t>& dilation = {1, 1});
Tensor conv_transpose2d(const Tensor& x, const Tensor& weight, const Tensor& bias, int64_t stride,
                        int64_t padding = 0, int64_t output_padding = 0, int64_t groups = 1,
                        int64_t dilation = 1);
// Transposed 1-D convolution: x [N, C_in, L] or [C_in, L], weight [C_in, C_out / groups, k].
Tensor conv_transpose1d(const Tensor& x, const Tensor& weight, const Tensor& bias = {},
                        int64_t stride = 1, int64_t padding = 0, int64_t output_padding = 0,
                        int64_t groups = 1, int64_t dilation = 1);

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
