#pragma once

// torch.nn.functional.interpolate: resizes the spatial dims of a [N, C, d1]
// (3-D), [N, C, h, w] (4-D) or [N, C, d, h, w] (5-D) tensor.

#include <optional>
#include <string>
#include <vector>

#include "tessera/core/tensor.h"

namespace tessera {

// Exactly one of size (output spatial sizes) and scale_factor (multipliers)
// is given, each with one entry per spatial dim or a single entry for all.
// mode: "nearest", "nearest-exact", "linear" (3-D), "bilinear" (4-D),
// "bicubic" (4-D), "trilinear" (5-D) or "area". align_corners applies to
// the linear and cubic modes only (default false); with a scale_factor and
// recompute_scale_factor unset or false, the scale itself maps output to
// input coordinates, else the ratio of the sizes. Differentiable in x.
Tensor interpolate(const Tensor& x, const std::vector<int64_t>& size = {},
                   const std::vector<double>& scale_factor = {},
                   const std::string& mode = "nearest",
                   std::optional<bool> align_corners = std::nullopt,
                   std::optional<bool> recompute_scale_factor = std::nullopt);

}  // namespace tessera
