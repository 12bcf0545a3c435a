#pragma once

// Normalisation over the trailing dims of a tensor.

#include <optional>

#include "tessera/core/tensor.h"

namespace tessera {

// (x - mean) / sqrt(var + eps) * weight + bias over the trailing dims given by
// normalized_shape (biased variance, as PyTorch); weight and bias, of shape
// normalized_shape, may be undefined tensors.
Tensor layer_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight = {},
                  const Tensor& bias = {}, double eps = 1e-5);
// x / sqrt(mean(x^2) + eps) * weight over the trailing dims; eps defaults to
// the machine epsilon of x's dtype (as torch.nn.functional.rms_norm).
Tensor rms_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight = {},
                std::optional<double> eps = std::nullopt);

}  // namespace tessera
