#pragma once

// Lower and upper triangles of matrices (the last two dims; leading dims are batch).

#include "tessera/core/tensor.h"

namespace tessera {

// x with elements above the diagonal-th diagonal zeroed (kept where col - row <= diagonal).
Tensor tril(const Tensor& x, int64_t diagonal = 0);
// x with elements below the diagonal-th diagonal zeroed (kept where col - row >= diagonal).
Tensor triu(const Tensor& x, int64_t diagonal = 0);

}  // namespace tessera
