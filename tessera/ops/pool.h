#pragma once

// Max, average and adaptive pooling over the last two dims of [N, C, H, W] or
// [C, H, W] tensors (1-D pooling over the last dim of [N, C, L] or [C, L]),
// as torch.nn.functional, with their gradients as ops.

#include <optional>
#include <utility>
#include <vector>

#include "tessera/core/tensor.h"

namespace tessera {

// Maximum over each window; stride defaults to kernel_size, padding (at most
// half the kernel) never wins. ceil_mode rounds the output size up, as long
// as the last window starts inside the input or its left padding. Gradients
// go to the first maximum (NaN wins).
Tensor max_pool2d(const Tensor& x, const std::vector<int64_t>& kernel_size,
                  const std::vector<int64_t>& stride = {},
                  const std::vector<int64_t>& padding = {0, 0},
                  const std::vector<int64_t>& dilation = {1, 1}, bool ceil_mode = false);
Tensor max_pool2d(const Tensor& x, int64_t kernel_size,
                  std::optional<int64_t> stride = std::nullopt, int64_t padding = 0,
                  int64_t dilation = 1, bool ceil_mode = false);
// max_pool2d with return_indices: (values, i64 indices), each index flat in
// its input's H * W plane (as PyTorch).
std::pair<Tensor, Tensor> max_pool2d_with_indices(const Tensor& x,
                                                  const std::vector<int64_t>& kernel_size,
                                                  const std::vector<int64_t>& stride = {},
                                                  const std::vector<int64_t>& padding = {0, 0},
                                                  const std::vector<int64_t>& dilation = {1, 1},
                                                  bool ceil_mode = false);

// Mean over each window; padded positions count towards the divisor when
// count_include_pad (PyTorch's default); divisor_override, when given,
// replaces the divisor. Note the argument order: count_include_pad comes
// before ceil_mode (PyTorch's keyword names, not its positions).
Tensor avg_pool2d(const Tensor& x, const std::vector<int64_t>& kernel_size,
                  const std::vector<int64_t>& stride = {},
                  const std::vector<int64_t>& padding = {0, 0}, bool count_include_pad = true,
                  bool ceil_mode = false, std::optional<int64_t> divisor_override = std::nullopt);
Tensor avg_pool2d(const Tensor& x, int64_t kernel_size,
                  std::optional<int64_t> stride = std::nullopt, int64_t padding = 0,
                  bool count_include_pad = true, bool ceil_mode = false,
                  std::optional<int64_t> divisor_override = std::nullopt);

// 1-D max pooling over the last dim of [N, C, L] or [C, L].
Tensor max_pool1d(const Tensor& x, int64_t kernel_size,
                  std::optional<int64_t> stride = std::nullopt, int64_t padding = 0,
                  int64_t dilation = 1, bool ceil_mode = false);
// max_pool1d with return_indices: (values, i64 indices into the last dim).
std::pair<Tensor, Tensor> max_pool1d_with_indices(const Tensor& x, int64_t kernel_size,
                                                  std::optional<int64_t> stride = std::nullopt,
                                                  int64_t padding = 0, int64_t dilation = 1,
                                                  bool ceil_mode = false);
// 1-D average pooling over the last dim of [N, C, L] or [C, L].
Tensor avg_pool1d(const Tensor& x, int64_t kernel_size,
                  std::optional<int64_t> stride = std::nullopt, int64_t padding = 0,
                  bool count_include_pad = true, bool ceil_mode = false);

// Adaptive pooling to output_size (height, width; -1 keeps that input size):
// output row i covers input rows [floor(i H / oh), ceil((i + 1) H / oh)),
// likewise columns.
Tensor adaptive_max_pool2d(const Tensor& x, const std::vector<int64_t>& output_size);
Tensor adaptive_max_pool2d(const Tensor& x, int64_t output_size);
// adaptive_max_pool2d with return_indices: (values, i64 indices flat in H * W).
std::pair<Tensor, Tensor> adaptive_max_pool2d_with_indices(
    const Tensor& x, const std::vector<int64_t>& output_size);
Tensor adaptive_avg_pool2d(const Tensor& x, const std::vector<int64_t>& output_size);
Tensor adaptive_avg_pool2d(const Tensor& x, int64_t output_size);
// 1-D adaptive pooling over the last dim of [N, C, L] or [C, L].
Tensor adaptive_max_pool1d(const Tensor& x, int64_t output_size);
// adaptive_max_pool1d with return_indices: (values, i64 indices along L).
std::pair<Tensor, Tensor> adaptive_max_pool1d_with_indices(const Tensor& x, int64_t output_size);
Tensor adaptive_avg_pool1d(const Tensor& x, int64_t output_size);

// Gradient of max_pool2d: grad_output routed to each window's first maximum of x.
Tensor max_pool2d_backward(const Tensor& grad_output, const Tensor& x,
                           const std::vector<int64_t>& kernel_size,
                           const std::vector<int64_t>& stride,
                           const std::vector<int64_t>& padding,
                           const std::vector<int64_t>& dilation, bool ceil_mode = false);
// For each max_pool2d window of x, the element of `source` (shaped like x)
// where x is maximal; the adjoint of max_pool2d_backward.
Tensor max_pool2d_select(const Tensor& x, const Tensor& source,
                         const std::vector<int64_t>& kernel_size,
                         const std::vector<int64_t>& stride,
                         const std::vector<int64_t>& padding,
                         const std::vector<int64_t>& dilation, bool ceil_mode = false);
// Gradient of avg_pool2d for an input of spatial size input_hw.
Tensor avg_pool2d_backward(const Tensor& grad_output, const std::vector<int64_t>& input_hw,
                           const std::vector<int64_t>& kernel_size,
                           const std::vector<int64_t>& stride,
                           const std::vector<int64_t>& padding, bool count_include_pad,
                           bool ceil_mode = false,
                           std::optional<int64_t> divisor_override = std::nullopt);

}  // namespace tessera
