#pragma once

// Random index sampling, as torch.randperm and torch.multinomial. Both draw
// from a Generator (the default one when null) and advance it, so a seeded
// generator gives the same indices on every platform. They return i64
// tensors and have no gradient.

#include <cstdint>

#include "tessera/core/rng.h"
#include "tessera/core/tensor.h"

namespace tessera {

// A random permutation of 0, 1, ..., n - 1 (n >= 0) as a [n] tensor of dtype
// `dtype` (an integer or floating dtype, i64 by default).
Tensor randperm(int64_t n, DType dtype = DType::i64, Generator* generator = nullptr);

// num_samples category indices per row of `probs` ([C] or [N, C]; any
// non-negative finite weights with a positive sum, not necessarily
// normalised), drawn with probability proportional to the weights. Without
// replacement each row's indices are distinct (num_samples must not exceed
// the number of categories with non-zero weight). Returns [num_samples] or
// [N, num_samples].
Tensor multinomial(const Tensor& probs, int64_t num_samples, bool replacement = false,
                   Generator* generator = nullptr);

}  // namespace tessera
