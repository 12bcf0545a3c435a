#include "tessera/core/shape.h"

#include <algorithm>

#include "tessera/core/error.h"

namespace tessera {

int64_t checked_add(int64_t a, int64_t b, const char* op) {
  int64_t result = 0;
  TESSERA_CHECK(!__builtin_add_overflow(a, b, &result), "[", op, "] size arithmetic overflows: ", a,
                " + ", b, " does not fit in int64");
  return result;
}

int64_t checked_mul(int64_t a, int64_t b, const char* op) {
  int64_t result = 0;
  TESSERA_CHECK(!__builtin_mul_overflow(a, b, &result), "[", op, "] size arithmetic overflows: ", a,
                " * ", b, " does not fit in int64");
  return result;
}

int64_t checked_numel(const Shape& shape, const char* op) {
  int64_t count = 1;
  bool overflow = false;
  for (int64_t size : shape) {
    TESSERA_CHECK(size >= 0, "[", op, "] invalid size ", size, " in shape ", shape_str(shape),
                  "; sizes must be >= 0");
    overflow = overflow || __builtin_mul_overflow(count, size, &count);
  }
  // A zero size anywhere makes the tensor empty, however large the others.
  if (std::find(shape.begin(), shape.end(), 0) != shape.end()) return 0;
  TESSERA_CHECK(!overflow, "[", op, "] shape ", shape_str(shape),
                " has more elements than int64 can count");
  return count;
}

int64_t window_output_size(int64_t in, int64_t kernel, int64_t stride, int64_t padding,
                           int64_t dilation, const char* op) {
  int64_t padded = checked_add(in, checked_mul(2, padding, op), op);
  int64_t extent = checked_add(checked_mul(dilation, kernel - 1, op), 1, op);
  int64_t span = checked_add(padded, -extent, op);
  return span < 0 ? 0 : span / stride + 1;
}

Strides contiguous_strides(const Shape& shape) {
  Strides strides(shape.size());
  int64_t running = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    strides[i] = running;
    running *= std::max<int64_t>(shape[i], 1);
  }
  return strides;
}

std::string shape_str(const Shape& shape) {
  std::string text = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) text += ", ";
    text += std::to_string(shape[i]);
  }
  return text + "]";
}

Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op) {
  if (a == b) return a;
  size_t ndim = std::max(a.size(), b.size());
  Shape out(ndim);
  for (size_t i = 0; i < ndim; ++i) {
    int64_t size_a = i < ndim - a.size() ? 1 : a[i - (ndim - a.size())];
    int64_t size_b = i < ndim - b.size() ? 1 : b[i - (ndim - b.size())];
    TESSERA_CHECK(size_a == size_b || size_a == 1 || size_b == 1, "[", op,
                  "] shapes cannot be broadcast: ", shape_str(a), " and ", shape_str(b),
                  "; aligned from the right, each dim pair must be equal or contain a 1");
    out[i] = size_a == 1 ? size_b : size_a;
  }
  return out;
}

int64_t normalize_dim(int64_t dim, int64_t ndim, const char* op) {
  int64_t bound = std::max<int64_t>(ndim, 1);
  TESSERA_CHECK(dim >= -bound && dim < bound, "[", op, "] dim ", dim,
                " is out of range for a tensor with ", ndim, " dims; valid: [", -bound, ", ",
                bound - 1, "]");
  return dim < 0 ? dim + bound : dim;
}

std::vector<int64_t> normalize_dims(const std::vector<int64_t>& dims, int64_t ndim,
                                    const char* op) {
  std::vector<int64_t> out;
  if (dims.empty()) {
    for (int64_t i = 0; i < ndim; ++i) out.push_back(i);
    return out;
  }
  for (int64_t dim : dims) {
    int64_t d = normalize_dim(dim, ndim, op);
    // A 0-d tensor accepts dim 0 / -1 (as PyTorch) but has no axis to name:
    // reducing over it reduces over nothing.
    if (ndim == 0) continue;
    TESSERA_CHECK(std::find(out.begin(), out.end(), d) == out.end(), "[", op, "] dim ", dim,
                  " appears more than once");
    out.push_back(d);
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace tessera
