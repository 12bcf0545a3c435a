#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tessera/core/dim_vector.h"

namespace tessera {

using Shape = DimVector;
using Strides = DimVector;

inline int64_t numel(const Shape& shape) {
  int64_t count = 1;
  for (int64_t size : shape) count *= size;
  return count;
}

// Checked size, stride and offset arithmetic: every computation of a size,
// stride or offset from user-given numbers goes through these, so that an
// int64 overflow is an error naming `op` instead of a wrapped value.
int64_t checked_add(int64_t a, int64_t b, const char* op);
int64_t checked_mul(int64_t a, int64_t b, const char* op);
// The element count of `shape`; throws naming `op` for a negative size or
// when the count does not fit in int64.
int64_t checked_numel(const Shape& shape, const char* op);
// Output length of a sliding window (convolution, pooling) over `in`
// elements: (in + 2 * padding - dilation * (kernel - 1) - 1) / stride + 1,
// computed without overflow; 0 or less when the window does not fit.
int64_t window_output_size(int64_t in, int64_t kernel, int64_t stride, int64_t padding,
                           int64_t dilation, const char* op);
// Row-major strides, in elements.
Strides contiguous_strides(const Shape& shape);
// "[2, 3]"
std::string shape_str(const Shape& shape);
// NumPy broadcasting of two shapes; throws naming `op` when incompatible.
Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op);
// Maps a possibly negative dim into [0, ndim); throws naming `op` when out of range.
int64_t normalize_dim(int64_t dim, int64_t ndim, const char* op);
// Normalises and de-duplicates a dim list; an empty list means all dims.
// For a 0-d tensor, dims 0 and -1 are accepted and the result is empty.
std::vector<int64_t> normalize_dims(const std::vector<int64_t>& dims, int64_t ndim,
                                    const char* op);

}  // namespace tessera
