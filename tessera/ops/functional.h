#pragma once

// torch.nn.functional helpers built from public ops: normalize,
// cosine_similarity, pairwise_distance, one_hot and embedding_bag.

#include <cstdint>
#include <optional>
#include <string>

#include "tessera/core/tensor.h"

namespace tessera {

// x / max(||x||_p, eps) along dim (p may be any value, inf included).
Tensor normalize(const Tensor& x, double p = 2.0, int64_t dim = 1, double eps = 1e-12);
// Cosine of the angle between x1 and x2 (broadcast together) along dim:
// sum(x1 / max(||x1||, eps) * x2 / max(||x2||, eps), dim).
Tensor cosine_similarity(const Tensor& x1, const Tensor& x2, int64_t dim = 1, double eps = 1e-8);
// ||x1 - x2 + eps||_p along the last dim (x1 and x2 broadcast together).
Tensor pairwise_distance(const Tensor& x1, const Tensor& x2, double p = 2.0, double eps = 1e-6,
                         bool keepdim = false);
// i64 one-hot encoding of the class indices x (i64) along a new last dim of
// num_classes entries; num_classes = -1 takes max(x) + 1.
Tensor one_hot(const Tensor& x, int64_t num_classes = -1);

// Sums ("sum"), means ("mean") or maxima ("max") of bags of rows of weight
// [V, D]: input is [B, N] (B bags of N indices, offsets undefined) or 1-D
// with 1-D offsets giving each bag's start (offsets[0] == 0; with
// include_last_offset the last entry ends the last bag). Empty bags give
// zeros; indices equal to padding_idx (negative counts from V) are skipped.
// per_sample_weights (input's shape, "sum" only) scales each row. [B, D];
// differentiable in weight and per_sample_weights.
Tensor embedding_bag(const Tensor& input, const Tensor& weight, const Tensor& offsets = {},
                     const std::string& mode = "mean", const Tensor& per_sample_weights = {},
                     bool include_last_offset = false,
                     std::optional<int64_t> padding_idx = std::nullopt);

}  // namespace tessera
