#pragma once

// Softmax and log-softmax along one dim, as fused numerically stable
// primitives (the row maximum is subtracted before exponentiating).

#include <optional>

#include "tessera/core/tensor.h"

namespace tessera {

// exp(x) / sum(exp(x), dim); x must be floating.
Tensor softmax(const Tensor& x, int64_t dim, std::optional<DType> dtype = std::nullopt);
// x - log(sum(exp(x), dim)), computed without forming softmax first.
Tensor log_softmax(const Tensor& x, int64_t dim, std::optional<DType> dtype = std::nullopt);

}  // namespace tessera
