#pragma once

// Reductions over any set of dims (empty = all dims), with keepdim.

#include <optional>
#include <tuple>
#include <vector>

#include "tessera/core/tensor.h"

namespace tessera {

using Dims = std::vector<int64_t>;

// Integer and bool inputs sum to i64 (as PyTorch); floating keep their dtype.
Tensor sum(const Tensor& x, const Dims& dims = {}, bool keepdim = false);
Tensor mean(const Tensor& x, const Dims& dims = {}, bool keepdim = false);
// dtype=: x is cast to dtype before reducing (torch.sum(x, dtype=...)),
// e.g. to sum f16 values in f32, or to average an integer tensor.
Tensor sum(const Tensor& x, const Dims& dims, bool keepdim, std::optional<DType> dtype);
Tensor mean(const Tensor& x, const Dims& dims, bool keepdim, std::optional<DType> dtype);
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

// Under PyTorch's names: the same reductions as max / min over dims.
Tensor amax(const Tensor& x, const Dims& dims = {}, bool keepdim = false);
Tensor amin(const Tensor& x, const Dims& dims = {}, bool keepdim = false);
// torch.max(x, dim) / torch.min(x, dim): the extremum along one dim and the
// first position holding it (NaN counts as the extremum); the gradient goes
// to that position alone. `auto [values, indices] = max(x, 1);` As in
// libtorch, max(x, {1}) also picks this overload; amax(x, {1}) reduces.
std::tuple<Tensor, Tensor> max(const Tensor& x, int64_t dim, bool keepdim = false);
std::tuple<Tensor, Tensor> min(const Tensor& x, int64_t dim, bool keepdim = false);
// Product of all entries, or along dim; integer and bool inputs multiply in
// i64 unless `dtype` is given. The gradient is exact with zeros.
Tensor prod(const Tensor& x, std::optional<DType> dtype = std::nullopt);
Tensor prod(const Tensor& x, int64_t dim, bool keepdim = false,
            std::optional<DType> dtype = std::nullopt);
// Whether all / any entries are nonzero (NaN counts as nonzero): bool, or
// u8 for u8 input as in PyTorch.
Tensor all(const Tensor& x);
Tensor all(const Tensor& x, int64_t dim, bool keepdim = false);
Tensor any(const Tensor& x);
Tensor any(const Tensor& x, int64_t dim, bool keepdim = false);
// The number of nonzero entries over dims (all when empty), i64.
Tensor count_nonzero(const Tensor& x, const Dims& dims = {});
// (var, mean) and (std, mean) in one call, as torch.var_mean / std_mean.
std::tuple<Tensor, Tensor> var_mean(const Tensor& x, const Dims& dims = {},
                                    int64_t correction = 1, bool keepdim = false);
std::tuple<Tensor, Tensor> std_mean(const Tensor& x, const Dims& dims = {},
                                    int64_t correction = 1, bool keepdim = false);

// Sums a broadcast gradient back down to `shape` (the inverse of broadcasting).
Tensor sum_to(const Tensor& x, const Shape& shape);

}  // namespace tessera
