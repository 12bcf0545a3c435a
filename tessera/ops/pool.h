#pragma once

// 2-D max and average pooling over the last two dims of [N, C, H, W] or
// [C, H, W] tensors (ceil_mode = false), with their gradients as ops.

#include <optional>
#include <vector>

#include "tessera/core/tensor.h"

namespace tessera {

// Maximum over each window; stride defaults to kernel_size, padding (at most
// half the dilated kernel) never wins. Gradients go to the first maximum.
Tensor max_pool2d(const Tensor& x, const std::vector<int64_t>& kernel_size,
                  const std::vector<int64_t>& stride = {},
                  const std::vector<int64_t>& padding = {0, 0},
                  const std::vector<int64_t>& dilation = {1, 1});
Tensor max_pool2d(const Tensor& x, int64_t kernel_size,
                  std::optional<int64_t> stride = std::nullopt, int64_t padding = 0,
                  int64_t dilation = 1);

// Mean over each window; padded positions count towards the divisor when
// count_include_pad (as PyTorch's default).
Tensor avg_pool2d(const Tensor& x, const std::vector<int64_t>& kernel_size,
                  const std::vector<int64_t>& stride = {},
                  const std::vector<int64_t>& padding = {0, 0}, bool count_include_pad = true);
Tensor avg_pool2d(const Tensor& x, int64_t kernel_size,
                  std::optional<int64_t> stride = std::nullopt, int64_t padding = 0,
                  bool count_include_pad = true);

// Gradient of max_pool2d: grad_output routed to each window's first maximum of x.
Tensor max_pool2d_backward(const Tensor& grad_output, const Tensor& x,
                           const std::vector<int64_t>& kernel_size,
                           const std::vector<int64_t>& stride,
                           const std::vector<int64_t>& padding,
                           const std::vector<int64_t>& dilation);
// For each max_pool2d window of x, the element of `source` (shaped like x)
// where x is maximal; the adjoint of max_pool2d_backward.
Tensor max_pool2d_select(const Tensor& x, const Tensor& source,
                         const std::vector<int64_t>& kernel_size,
                         const std::vector<int64_t>& stride,
                         const std::vector<int64_t>& padding,
                         const std::vector<int64_t>& dilation);
// Gradient of avg_pool2d for an input of spatial size input_hw.
Tensor avg_pool2d_backward(const Tensor& grad_output, const std::vector<int64_t>& input_hw,
                           const std::vector<int64_t>& kernel_size,
                           const std::vector<int64_t>& stride,
                           const std::vector<int64_t>& padding, bool count_include_pad);

}  // namespace tessera
