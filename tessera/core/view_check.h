#pragma once

// The bounds check every view makes (make_alias), on its own so that its
// cost can be measured beside a whole view (bench/ops_bench.cpp).

#include <cstdint>

#include "tessera/core/shape.h"

namespace tessera {

// Raises an error naming the view when an element of shape/strides/offset
// lies outside memory holding `elements` elements (an empty view reaches
// none; overflow of the reach counts as outside), or when shape and strides
// differ in length. `elements` < 0: memory not known (a meta tensor), only
// the lengths are checked.
void check_view_in_memory(const Shape& shape, const Strides& strides, int64_t offset,
                          int64_t elements);

}  // namespace tessera
