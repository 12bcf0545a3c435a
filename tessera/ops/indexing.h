#pragma once

// libtorch's indexing API: x.index({Slice(), 0}), x.index({Slice(1, 3), None,
// Ellipsis}), x.index({rows, cols}) with index tensors, x.index({bool_mask})
// and x.index_put_({mask}, y), with tessera::indexing::{Slice, None,
// Ellipsis} as in torch::indexing. Index tensors follow PyTorch's advanced
// indexing: they broadcast together, and their dims replace the indexed
// ones in place when those are adjacent, else at the front.

#include <cstdint>
#include <optional>
#include <variant>
#include <vector>

#include "tessera/core/tensor.h"

namespace tessera::indexing {

struct NoneIndex {};
struct EllipsisIndex {};
inline constexpr NoneIndex None{};
inline constexpr EllipsisIndex Ellipsis{};

// A bound of a Slice: an integer, or absent (None, std::nullopt).
struct SliceBound {
  SliceBound(std::nullopt_t = std::nullopt) {}  // NOLINT: implicit, as Python's None
  SliceBound(NoneIndex) {}  // NOLINT
  SliceBound(int64_t bound) : value(bound) {}  // NOLINT
  SliceBound(int bound) : value(bound) {}  // NOLINT
  SliceBound(std::optional<int64_t> bound) : value(bound) {}  // NOLINT
  std::optional<int64_t> value;
};

// start:stop:step, each optional as in Python: Slice(None, None, 2) is ::2.
struct Slice {
  Slice(SliceBound start = {}, SliceBound stop = {}, SliceBound step = {})
      : start(start.value), stop(stop.value), step(step.value) {}
  std::optional<int64_t> start;
  std::optional<int64_t> stop;
  std::optional<int64_t> step;
};

// One entry of an index list: an integer, a Slice, None, Ellipsis, or a
// tensor (integer indices, or a bool mask selecting where it is true).
class TensorIndex {
 public:
  TensorIndex(int64_t index) : value_(index) {}  // NOLINT: implicit, as libtorch's
  TensorIndex(int index) : value_(static_cast<int64_t>(index)) {}  // NOLINT
  TensorIndex(Slice slice) : value_(slice) {}  // NOLINT
  TensorIndex(NoneIndex none) : value_(none) {}  // NOLINT
  TensorIndex(EllipsisIndex ellipsis) : value_(ellipsis) {}  // NOLINT
  TensorIndex(Tensor tensor) : value_(std::move(tensor)) {}  // NOLINT

  const std::variant<int64_t, Slice, NoneIndex, EllipsisIndex, Tensor>& value() const {
    return value_;
  }

 private:
  std::variant<int64_t, Slice, NoneIndex, EllipsisIndex, Tensor> value_;
};

}  // namespace tessera::indexing

namespace tessera {

// torch.index_put, out of place: x with `values` (broadcast to the
// selection, cast to x's dtype) written where x.index(indices) selects, or
// added there with accumulate (repeated positions add up; without
// accumulate the last one in index order wins).
Tensor index_put(const Tensor& x, const std::vector<indexing::TensorIndex>& indices,
                 const Tensor& values, bool accumulate = false);

}  // namespace tessera
