#pragma once

// Sliding-window rearrangements: im2col (unfold) and col2im (fold), and
// pixel (un)shuffle, as torch.nn.functional.

#include <vector>

#include "tessera/core/tensor.h"

namespace tessera {

// im2col, as torch.nn.functional.unfold: x [N, C, H, W] (or [C, H, W]) to
// [N, C * kh * kw, L] (or [C * kh * kw, L]), L the number of windows; row
// (c, ky, kx) holds that tap of every window.
Tensor unfold(const Tensor& x, const std::vector<int64_t>& kernel_size,
              const std::vector<int64_t>& dilation = {1, 1},
              const std::vector<int64_t>& padding = {0, 0},
              const std::vector<int64_t>& stride = {1, 1});
// col2im, as torch.nn.functional.fold: sums the columns of unfold's layout
// back into an [N, C, output_size] image (the adjoint of unfold).
Tensor fold(const Tensor& x, const std::vector<int64_t>& output_size,
            const std::vector<int64_t>& kernel_size, const std::vector<int64_t>& dilation = {1, 1},
            const std::vector<int64_t>& padding = {0, 0},
            const std::vector<int64_t>& stride = {1, 1});

// [*, C * r * r, H, W] to [*, C, H * r, W * r], as torch.nn.functional.pixel_shuffle.
Tensor pixel_shuffle(const Tensor& x, int64_t upscale_factor);
// The inverse: [*, C, H * r, W * r] to [*, C * r * r, H, W].
Tensor pixel_unshuffle(const Tensor& x, int64_t downscale_factor);

}  // namespace tessera
