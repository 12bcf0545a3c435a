#pragma once

// Indexing: lookups (embedding, index_select, gather) and their adjoints
// (scatter_add, index_add), which also serve as their gradients. Index
// tensors are i64 or i32; an index outside [0, size) throws an error naming
// the op, the index and the valid range. Scatters are deterministic.

#include <optional>
#include <string>

#include "tessera/core/tensor.h"
#include "tessera/ops/scalar.h"

namespace tessera {

// Rows of weight [V, D] at `indices` (any shape): [*indices.shape, D].
// Rows at padding_idx (negative counts from V) get no gradient.
Tensor embedding(const Tensor& weight, const Tensor& indices,
                 std::optional<int64_t> padding_idx = std::nullopt);
// The entries of x at the positions of the 1-D `index` along dim.
Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index);
// out[i][j][k] = x[i][index[i][j][k]][k] for dim = 1; out has index's shape
// and index.size(d) <= x.size(d) for d != dim.
Tensor gather(const Tensor& x, int64_t dim, const Tensor& index);
// x with src[i][j][k] added at [i][index[i][j][k]][k] for dim = 1 (as
// torch.scatter_add); index.size(d) <= src.size(d), and <= x.size(d) for d != dim.
Tensor scatter_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src);
// x with src[i][j][k] written at [i][index[i][j][k]][k] for dim = 1 (as
// torch.scatter); src takes x's dtype. Where index repeats a position the
// last entry in index order wins (PyTorch leaves that order unspecified).
Tensor scatter(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src);
Tensor scatter(const Tensor& x, int64_t dim, const Tensor& index, Scalar value);
// torch.scatter's reduce="add" | "multiply": scatter_reduce's sum and prod.
Tensor scatter(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src,
               const std::string& reduce);
Tensor scatter(const Tensor& x, int64_t dim, const Tensor& index, Scalar value,
               const std::string& reduce);
// Every entry of src sent to a position by index, reduced there with
// reduce = "sum", "prod", "mean", "amax" or "amin" (as torch.scatter_reduce);
// x's own value takes part unless include_self is false. Integer means round down.
Tensor scatter_reduce(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src,
                      const std::string& reduce, bool include_self = true);
// x with alpha * source.select(dim, i) added at x.select(dim, index[i]) for each i.
Tensor index_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& source,
                 double alpha = 1.0);

}  // namespace tessera
