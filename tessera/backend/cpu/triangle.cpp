// CPU kernels for tril and triu (ops/triangle.cpp): per matrix row, the kept
// columns are one contiguous range; the rest are zero.

#include <algorithm>

#include "tessera/backend/cpu/data_movement.h"
#include "tessera/ops/op.h"

namespace tessera::cpu {

namespace {

void triangle(KernelContext& ctx, bool lower) {
  const Tensor& x = ctx.inputs[0];
  Tensor& out = ctx.outputs[0];
  const int64_t ndim = x.dim();
  const int64_t num_rows = x.shape()[ndim - 2], num_cols = x.shape()[ndim - 1];
  if (out.numel() == 0) return;
  // Beyond these bounds every row is fully kept or fully zeroed.
  const int64_t diagonal =
      std::clamp<int64_t>(ctx.attrs.i("diagonal"), -num_rows - 1, num_cols + 1);
  const int64_t row_stride = x.strides()[ndim - 2], col_stride = x.strides()[ndim - 1];
  dispatch_by_size(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    T* out_base = storage_ptr<T>(out) + out.offset();
    const T* x_base = storage_ptr<T>(x);
    int64_t grain = std::max<int64_t>(1, kElementwiseGrain / num_cols);
    parallel_for(0, out.numel() / num_cols, grain, [&](int64_t lo, int64_t hi) {
      for (int64_t row = lo; row < hi; ++row) {
        int64_t r = row % num_rows, batch = row / num_rows;
        int64_t offset = x.offset() + r * row_stride;
        for (int64_t d = ndim - 3; d >= 0; --d) {
          offset += (batch % x.shape()[d]) * x.strides()[d];
          batch /= x.shape()[d];
        }
        int64_t begin = lower ? 0 : std::clamp<int64_t>(r + diagonal, 0, num_cols);
        int64_t end = lower ? std::clamp<int64_t>(r + diagonal + 1, 0, num_cols) : num_cols;
        T* __restrict po = out_base + row * num_cols;
        const T* __restrict px = x_base + offset;
        std::fill(po, po + begin, T(0));
        if (col_stride == 1) {
          for (int64_t c = begin; c < end; ++c) po[c] = px[c];
        } else {
          for (int64_t c = begin; c < end; ++c) po[c] = px[c * col_stride];
        }
        std::fill(po + end, po + num_cols, T(0));
      }
    });
  });
}

void tril_kernel(KernelContext& ctx) {
  triangle(ctx, true);
}
void triu_kernel(KernelContext& ctx) {
  triangle(ctx, false);
}

#define TESSERA_TRIANGLE_DTYPES                                                                \
  ::tessera::DType::f32, ::tessera::DType::f64, ::tessera::DType::bf16, ::tessera::DType::f16, \
      ::tessera::DType::i64, ::tessera::DType::i32, ::tessera::DType::u8,                      \
      ::tessera::DType::boolean
TESSERA_REGISTER_KERNEL("tril", cpu, tril_kernel, TESSERA_TRIANGLE_DTYPES);
TESSERA_REGISTER_KERNEL("triu", cpu, triu_kernel, TESSERA_TRIANGLE_DTYPES);

}  // namespace

}  // namespace tessera::cpu
