#pragma once

// Reductions over any set of dims (empty = all dims), with keepdim.

#include <optional>
#include <vector>

#include "tessera/core/tensor.h"

namespace tessera {

using Dims = std::vector<int64_t>;

// Integer and bool inputs sum to i64 (as PyTorch); floating keep their dtype.
Tensor sum(const Tensor& x, const Dims& dims = {}, bool keepdim = false);
Tensor mean(const Tensor& x, const Dims& dims = {}, bool keepdim = false);
// Maximum / minimum values (torch.amax / amin); ties share the gradient.
Tensor max(const Tensor& x, const Dims& dims = {}, bool keepdim = false);
Tensor min(const Tensor& x, const Dims& dims = {}, bool keepdim = false);
// Index (i64) of the first maximum / minimum along dim, or over the
// flattened tensor when dim is absent.
Tensor argmax(const Tensor& x, std::optional<int64_t> dim = std::nullopt, bool keepdim = false);
Tensor argmin(const Tensor& x, std::optional<int64_t> dim = std::nullopt, bool keepdim = false);
// Variance and standard deviation with Bessel's correction by default.
Tensor var(const Tensor& x, const Dims& dims = {}, int64_t correction = 1, bool keepdim = false);
Tensor std(const Tensor& x, const Dims& dims = {}, int64_t correction = 1, bool keepdim = false);
// log(sum(exp(x))) computed stably.
Tensor logsumexp(const Tensor& x, const Dims& dims = {}, bool keepdim = false);

// Sums a broadcast gradient back down to `shape` (the inverse of broadcasting).
Tensor sum_to(const Tensor& x, const Shape& shape);

}  // namespace tessera
