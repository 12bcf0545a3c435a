#pragma once

// Helpers for kernels that only move elements (cat, pad, tril/triu,
// gathers): elements are copied as unsigned integers of the same width, so
// one instantiation serves every dtype of that size.

#include <array>
#include <cstdint>
#include <cstring>

#include "tessera/backend/cpu/loops.h"
#include "tessera/core/dtype.h"

namespace tessera::cpu {

// Calls fn(T{}) with T an unsigned integer as wide as one element of dtype.
template <typename Fn>
void dispatch_by_size(DType dtype, Fn&& fn) {
  switch (dtype_size(dtype)) {
    case 1:
      fn(uint8_t{});
      break;
    case 2:
      fn(uint16_t{});
      break;
    case 4:
      fn(uint32_t{});
      break;
    case 8:
      fn(uint64_t{});
      break;
    default:
      TESSERA_FAIL("[copy] unsupported element size ", dtype_size(dtype));
  }
}

// dst = src elementwise; both have the same shape and any strides (dst is
// typically a window aliasing a larger output). Runs in parallel.
inline void copy_into(const Tensor& src, const Tensor& dst) {
  if (src.numel() == 0) return;
  auto loop =
      make_loop<2>(src.shape(), {dst.strides(), src.strides()}, {dst.offset(), src.offset()});
  dispatch_by_size(src.dtype(), [&](auto tag) {
    using T = decltype(tag);
    T* out_base = storage_ptr<T>(dst);
    const T* in_base = storage_ptr<T>(src);
    for_each_run(loop, [&](const std::array<int64_t, 2>& offsets,
                           const std::array<int64_t, 2>& strides, int64_t n) {
      T* __restrict po = out_base + offsets[0];
      const T* __restrict pi = in_base + offsets[1];
      if (strides[0] == 1 && strides[1] == 1) {
        std::memcpy(po, pi, static_cast<size_t>(n) * sizeof(T));
      } else {
        for (int64_t i = 0; i < n; ++i) po[i * strides[0]] = pi[i * strides[1]];
      }
    });
  });
}

// A value of dtype T converted from double (16-bit floats go through f32).
template <typename T>
T value_as(double value) {
  if constexpr (std::is_same_v<T, BFloat16> || std::is_same_v<T, Half>) {
    return T(static_cast<float>(value));
  } else {
    return static_cast<T>(value);
  }
}

}  // namespace tessera::cpu
