#pragma once

// Inverted dropout with a counter-based mask.

#include "tessera/core/rng.h"
#include "tessera/core/tensor.h"

namespace tessera {

// Zeroes each element with probability p and scales the rest by 1 / (1 - p).
// Returns x itself when not training or p == 0, and zeros when p == 1.
// Element i's keep decision depends only on (seed, offset, i), drawn from
// `generator` (the default one when null), so shards and the gradient (which
// reuses the mask) agree with the unsharded forward.
Tensor dropout(const Tensor& x, double p, bool training = true, Generator* generator = nullptr);

}  // namespace tessera
