#pragma once

// Shape and selection ops built from views, index_select, gather and where,
// as PyTorch defines them: flip, roll, repeat, tile, repeat_interleave,
// movedim / moveaxis, t, swapaxes / swapdims, unbind, take_along_dim,
// nonzero, masked_select, index_fill. Their gradients are those of the ops
// they are made of.

#include <cstdint>
#include <optional>
#include <vector>

#include "tessera/core/tensor.h"
#include "tessera/ops/scalar.h"

namespace tessera {

// x with the order of entries reversed along each of `dims` (a copy).
Tensor flip(const Tensor& x, const std::vector<int64_t>& dims);
// Entries shifted by shifts[i] along dims[i], wrapping around; without dims,
// over the flattened tensor (one shift), shape kept.
Tensor roll(const Tensor& x, const std::vector<int64_t>& shifts,
            const std::vector<int64_t>& dims = {});
// x tiled repeats[i] times along dim i; repeats may have more entries than x
// has dims (new leading dims), not fewer.
Tensor repeat(const Tensor& x, const std::vector<int64_t>& repeats);
// As repeat, with fewer reps than dims allowed (leading ones implied).
Tensor tile(const Tensor& x, const std::vector<int64_t>& reps);
// Each entry repeated `repeats` times along dim (the flattened tensor without one).
Tensor repeat_interleave(const Tensor& x, int64_t repeats,
                         std::optional<int64_t> dim = std::nullopt);
// Entry i repeated repeats[i] times (repeats: i64, 0-d or one per entry).
Tensor repeat_interleave(const Tensor& x, const Tensor& repeats,
                         std::optional<int64_t> dim = std::nullopt);
// torch.repeat_interleave(repeats): i repeated repeats[i] times.
Tensor repeat_interleave(const Tensor& repeats);
// A view with dims `source` moved to positions `destination`, the others in order.
Tensor movedim(const Tensor& x, const std::vector<int64_t>& source,
               const std::vector<int64_t>& destination);
Tensor movedim(const Tensor& x, int64_t source, int64_t destination);
Tensor moveaxis(const Tensor& x, const std::vector<int64_t>& source,
                const std::vector<int64_t>& destination);
Tensor moveaxis(const Tensor& x, int64_t source, int64_t destination);
// The transpose of a matrix; 0-d and 1-D tensors come back as they are.
Tensor t(const Tensor& x);
Tensor swapaxes(const Tensor& x, int64_t axis0, int64_t axis1);
Tensor swapdims(const Tensor& x, int64_t dim0, int64_t dim1);
// The slices along dim, as views.
std::vector<Tensor> unbind(const Tensor& x, int64_t dim = 0);
// gather with indices broadcast against x except along dim; without dim,
// over both flattened.
Tensor take_along_dim(const Tensor& x, const Tensor& indices,
                      std::optional<int64_t> dim = std::nullopt);
// The i64 coordinates [n, x.dim()] of x's nonzero entries, in row-major order.
Tensor nonzero(const Tensor& x);
// nonzero(x, as_tuple=True): one 1-D i64 tensor of coordinates per dim.
std::vector<Tensor> nonzero_tuple(const Tensor& x);
// The entries of x where the bool mask (broadcast with x) is true, 1-D.
Tensor masked_select(const Tensor& x, const Tensor& mask);
// x with the slices at `index` (i64, 0-d or 1-D) along dim set to value.
Tensor index_fill(const Tensor& x, int64_t dim, const Tensor& index, Scalar value);
// The same with a 0-d tensor value (which gets the gradient of the filled entries).
Tensor index_fill(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& value);

}  // namespace tessera
