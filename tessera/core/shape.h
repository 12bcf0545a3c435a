#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tessera {

using Shape = std::vector<int64_t>;
using Strides = std::vector<int64_t>;

int64_t numel(const Shape& shape);
// Row-major strides, in elements.
Strides contiguous_strides(const Shape& shape);
// "[2, 3]"
std::string shape_str(const Shape& shape);
// NumPy broadcasting of two shapes; throws naming `op` when incompatible.
Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op);
// Maps a possibly negative dim into [0, ndim); throws naming `op` when out of range.
int64_t normalize_dim(int64_t dim, int64_t ndim, const char* op);
// Normalises and de-duplicates a dim list; an empty list means all dims.
std::vector<int64_t> normalize_dims(const std::vector<int64_t>& dims, int64_t ndim,
                                    const char* op);

}  // namespace tessera
