#pragma once

// Scans and sorting along one dim, as in PyTorch: cumsum, cumprod, sort,
// argsort, topk. The pairs come back as std::tuple so that
// `auto [values, indices] = sort(x);` reads as it does in libtorch.

#include <cstdint>
#include <optional>
#include <tuple>

#include "tessera/core/tensor.h"

namespace tessera {

// Running sum / product along dim. Integer and bool inputs accumulate in
// i64 (PyTorch's default); `dtype` casts the input first.
Tensor cumsum(const Tensor& x, int64_t dim, std::optional<DType> dtype = std::nullopt);
Tensor cumprod(const Tensor& x, int64_t dim, std::optional<DType> dtype = std::nullopt);

// Values sorted along dim and the i64 positions they came from. NaN sorts
// above every number, as in PyTorch. With stable, equal values keep their
// order; without, they come out as PyTorch's CPU sort leaves them (the same
// algorithm runs). Bools sort false first.
std::tuple<Tensor, Tensor> sort(const Tensor& x, int64_t dim = -1, bool descending = false,
                                bool stable = false);
Tensor argsort(const Tensor& x, int64_t dim = -1, bool descending = false, bool stable = false);

// The k largest (smallest) entries along dim and their positions, largest
// first (smallest first); with sorted = false the order is unspecified.
// Tied values come out in the positions PyTorch's CPU kernel gives them
// (its selection algorithm is followed step for step).
std::tuple<Tensor, Tensor> topk(const Tensor& x, int64_t k, int64_t dim = -1, bool largest = true,
                                bool sorted = true);

}  // namespace tessera
