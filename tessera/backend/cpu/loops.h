#pragma once

// Iteration helpers shared by the CPU kernels: walking N operands with
// arbitrary (broadcast) strides over one output shape, in parallel.

#include <array>
#include <cstdint>
#include <vector>

#include "tessera/core/shape.h"
#include "tessera/core/tensor.h"
#include "tessera/core/thread_pool.h"

namespace tessera::cpu {

// Strides of `tensor` viewed with shape `out_shape` under broadcasting
// (0 for broadcast dims), in elements.
Strides broadcast_strides(const Tensor& tensor, const Shape& out_shape);

// N operands over one shape, with dims merged wherever every operand is
// contiguous across them, so most loops become one long inner run.
template <size_t N>
struct StridedLoop {
  Shape shape;
  std::array<Strides, N> strides;
  std::array<int64_t, N> base{};
};

template <size_t N>
StridedLoop<N> make_loop(const Shape& shape, const std::array<Strides, N>& strides,
                         const std::array<int64_t, N>& base) {
  StridedLoop<N> loop;
  loop.base = base;
  // Drop size-1 dims, then merge neighbours that are contiguous for all operands.
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 1) continue;
    bool merge = !loop.shape.empty();
    if (merge) {
      for (size_t k = 0; k < N; ++k) {
        if (loop.strides[k].back() != strides[k][d] * shape[d]) merge = false;
      }
    }
    if (merge) {
      loop.shape.back() *= shape[d];
      for (size_t k = 0; k < N; ++k) loop.strides[k].back() = strides[k][d];
    } else {
      loop.shape.push_back(shape[d]);
      for (size_t k = 0; k < N; ++k) loop.strides[k].push_back(strides[k][d]);
    }
  }
  if (loop.shape.empty()) {
    loop.shape.push_back(1);
    for (size_t k = 0; k < N; ++k) loop.strides[k].push_back(0);
  }
  return loop;
}

// Calls fn(offsets, inner_strides, n) for each innermost run of the loop,
// where offsets[k] is operand k's element offset of the run's first element.
// Runs are distributed over threads by rows.
template <size_t N, typename Fn>
void for_each_run(const StridedLoop<N>& loop, Fn&& fn) {
  const int64_t ndim = static_cast<int64_t>(loop.shape.size());
  const int64_t inner = loop.shape.back();
  int64_t rows = 1;
  for (int64_t d = 0; d + 1 < ndim; ++d) rows *= loop.shape[d];
  std::array<int64_t, N> inner_strides;
  for (size_t k = 0; k < N; ++k) inner_strides[k] = loop.strides[k].back();

  if (rows == 1) {
    // One long run: split it across threads.
    parallel_for(0, inner, kElementwiseGrain, [&](int64_t lo, int64_t hi) {
      std::array<int64_t, N> offsets;
      for (size_t k = 0; k < N; ++k) offsets[k] = loop.base[k] + lo * inner_strides[k];
      fn(offsets, inner_strides, hi - lo);
    });
    return;
  }
  int64_t grain = std::max<int64_t>(1, kElementwiseGrain / std::max<int64_t>(inner, 1));
  parallel_for(0, rows, grain, [&](int64_t lo, int64_t hi) {
    std::vector<int64_t> index(ndim > 1 ? ndim - 1 : 1, 0);
    int64_t remaining = lo;
    for (int64_t d = ndim - 2; d >= 0; --d) {
      index[d] = remaining % loop.shape[d];
      remaining /= loop.shape[d];
    }
    for (int64_t row = lo; row < hi; ++row) {
      std::array<int64_t, N> offsets = loop.base;
      for (int64_t d = 0; d + 1 < ndim; ++d) {
        for (size_t k = 0; k < N; ++k) offsets[k] += index[d] * loop.strides[k][d];
      }
      fn(offsets, inner_strides, inner);
      for (int64_t d = ndim - 2; d >= 0; --d) {
        if (++index[d] < loop.shape[d]) break;
        index[d] = 0;
      }
    }
  });
}

// Element offsets of a contiguous output plus the inputs broadcast to `shape`.
template <size_t N>
StridedLoop<N> loop_over(const Tensor& out, const std::array<Tensor, N - 1>& inputs) {
  std::array<Strides, N> strides;
  std::array<int64_t, N> base;
  strides[0] = out.strides();
  base[0] = out.offset();
  for (size_t k = 1; k < N; ++k) {
    strides[k] = broadcast_strides(inputs[k - 1], out.shape());
    base[k] = inputs[k - 1].offset();
  }
  return make_loop<N>(out.shape(), strides, base);
}

// Base pointer of a tensor's storage, typed (offsets from loops are added to it).
template <typename T>
T* storage_ptr(const Tensor& tensor) {
  return static_cast<T*>(tensor.impl().storage->data());
}

}  // namespace tessera::cpu
