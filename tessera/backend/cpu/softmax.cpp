// CPU kernels for softmax and log_softmax (ops/softmax.cpp). The input is
// viewed as [outer, size, inner] around the softmax dim. inner == 1 (the
// usual last-dim case) runs row by row over cache-resident rows: max, then
// exp and sum, then scale. Otherwise blocks of `inner` columns are processed
// together so the loops still run over contiguous memory.

#include <algorithm>
#include <cmath>
#include <limits>

#include "tessera/backend/cpu/row_math.h"
#include "tessera/core/grad_mode.h"
#include "tessera/core/thread_pool.h"
#include "tessera/ops/op.h"
#include "tessera/ops/view.h"

namespace tessera::cpu {

namespace {

// Columns processed together when the softmax dim is not the innermost.
constexpr int64_t kColumnBlock = 64;
// Elements per parallel chunk.
constexpr int64_t kSoftmaxGrain = 8192;

template <typename T, bool Log>
void softmax_row(const T* __restrict x, T* __restrict y, int64_t n) {
  const T shift = rows::max(x, n);
  if constexpr (Log) {
    // (x - shift) - log(sum) rather than x - (shift + log(sum)): exact for
    // the largest entries even when |shift| is large.
    const T log_sum = static_cast<T>(std::log(rows::exp_sum<T, false>(x, y, n, shift)));
    for (int64_t i = 0; i < n; ++i) y[i] = (x[i] - shift) - log_sum;
  } else {
    const T scale = static_cast<T>(1.0 / rows::exp_sum<T, true>(x, y, n, shift));
    for (int64_t i = 0; i < n; ++i) y[i] *= scale;
  }
}

// `width` adjacent columns of a [size, inner] block (row stride `inner`).
template <typename T, bool Log>
void softmax_columns(const T* __restrict x, T* __restrict y, int64_t size, int64_t inner,
                     int64_t width) {
  T shift[kColumnBlock];
  double total[kColumnBlock];
  T factor[kColumnBlock];
  for (int64_t j = 0; j < width; ++j) {
    shift[j] = -std::numeric_limits<T>::infinity();
    total[j] = 0;
  }
  for (int64_t r = 0; r < size; ++r) {
    const T* row = x + r * inner;
    for (int64_t j = 0; j < width; ++j) shift[j] = row[j] > shift[j] ? row[j] : shift[j];
  }
  for (int64_t r = 0; r < size; ++r) {
    const T* row = x + r * inner;
    T* out = y + r * inner;
    for (int64_t j = 0; j < width; ++j) {
      const T e = rows::exp_nonpositive(row[j] - shift[j]);
      if constexpr (!Log) out[j] = e;
      total[j] += e;
    }
  }
  for (int64_t j = 0; j < width; ++j) {
    factor[j] = Log ? static_cast<T>(std::log(total[j])) : static_cast<T>(1.0 / total[j]);
  }
  for (int64_t r = 0; r < size; ++r) {
    const T* row = x + r * inner;
    T* out = y + r * inner;
    if constexpr (Log) {
      for (int64_t j = 0; j < width; ++j) out[j] = (row[j] - shift[j]) - factor[j];
    } else {
      for (int64_t j = 0; j < width; ++j) out[j] *= factor[j];
    }
  }
}

template <typename T, bool Log>
void softmax_impl(const Tensor& input, Tensor& out, int64_t dim) {
  if (out.numel() == 0) return;
  T* po = out.data<T>();
  if (input.dim() == 0) {
    softmax_row<T, Log>(input.data<T>(), po, 1);
    return;
  }
  const Shape& shape = input.shape();
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < dim; ++d) outer *= shape[d];
  for (int64_t d = dim + 1; d < input.dim(); ++d) inner *= shape[d];
  const int64_t size = shape[dim];

  Tensor x = input;
  int64_t row_stride = size;
  if (inner == 1) {
    auto strides = view_strides(shape, input.strides(), {outer, size});
    if (strides && ((*strides)[1] == 1 || size == 1)) {
      row_stride = (*strides)[0];
    } else {
      x = Tensor();
    }
  } else if (!input.is_contiguous()) {
    x = Tensor();
  }
  if (!x.defined()) {
    NoGradGuard no_grad;
    x = input.contiguous();
    row_stride = size;
  }
  const T* px = x.data<T>();

  if (inner == 1) {
    const int64_t grain = std::max<int64_t>(1, kSoftmaxGrain / size);
    parallel_for(0, outer, grain, [&](int64_t lo, int64_t hi) {
      for (int64_t o = lo; o < hi; ++o) {
        softmax_row<T, Log>(px + o * row_stride, po + o * size, size);
      }
    });
    return;
  }
  const int64_t blocks = (inner + kColumnBlock - 1) / kColumnBlock;
  const int64_t grain =
      std::max<int64_t>(1, kSoftmaxGrain / (size * std::min(inner, kColumnBlock)));
  parallel_for(0, outer * blocks, grain, [&](int64_t lo, int64_t hi) {
    for (int64_t task = lo; task < hi; ++task) {
      const int64_t o = task / blocks;
      const int64_t j = (task % blocks) * kColumnBlock;
      const int64_t offset = o * size * inner + j;
      softmax_columns<T, Log>(px + offset, po + offset, size, inner,
                              std::min(kColumnBlock, inner - j));
    }
  });
}

template <bool Log>
void softmax_kernel(KernelContext& ctx) {
  const int64_t dim = ctx.attrs.i("dim");
  TESSERA_DISPATCH_FLOATING(ctx.inputs[0].dtype(), ctx.op.name, [&] {
    softmax_impl<scalar_t, Log>(ctx.inputs[0], ctx.outputs[0], dim);
  });
}

TESSERA_REGISTER_KERNEL("softmax", cpu, softmax_kernel<false>, ::tessera::DType::f32,
                        ::tessera::DType::f64);
TESSERA_REGISTER_KERNEL("log_softmax", cpu, softmax_kernel<true>, ::tessera::DType::f32,
                        ::tessera::DType::f64);

}  // namespace

}  // namespace tessera::cpu
