#pragma once

// The part of its storage a strided tensor can reach, for the checks that
// writes make against their inputs (ops/dispatch.cpp, the copy_ kernel).

#include <cstdint>
#include <utility>

#include "tessera/core/tensor.h"

namespace tessera {

// The storage elements `t` can reach: [first, last] (t non-empty).
inline std::pair<int64_t, int64_t> element_span(const Tensor& t) {
  int64_t last = t.offset();
  for (int64_t d = 0; d < t.dim(); ++d) last += (t.shape()[d] - 1) * t.strides()[d];
  return {t.offset(), last};
}

// Whether the elements `a` and `b` address in one storage may meet, judged
// by the spans of memory they cover. Tensors without storage of their own
// (meta and global tensors) meet nothing.
inline bool spans_meet(const Tensor& a, const Tensor& b) {
  if (!a.defined() || a.impl().storage == nullptr || !a.shares_storage(b) || a.numel() == 0 ||
      b.numel() == 0) {
    return false;
  }
  const auto [a_first, a_last] = element_span(a);
  const auto [b_first, b_last] = element_span(b);
  return a_first <= b_last && b_first <= a_last;
}

// Whether `a` and `b` are the same elements in the same order.
inline bool same_elements(const Tensor& a, const Tensor& b) {
  return a.shares_storage(b) && a.offset() == b.offset() && a.shape() == b.shape() &&
         a.strides() == b.strides() && a.dtype() == b.dtype();
}

}  // namespace tessera
