#pragma once

// torch.nn.functional helpers built from public ops: normalize,
// cosine_similarity, pairwise_distance and one_hot.

#include <cstdint>

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

}  // namespace tessera
