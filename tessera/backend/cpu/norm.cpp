// CPU kernel for layer_norm (ops/norm.cpp): rows of the normalised size,
// each read from memory once and then re-read from cache for the variance
// (two-pass, so no cancellation) and for the output.

#include <algorithm>
#include <cmath>

#include "tessera/backend/cpu/row_math.h"
#include "tessera/core/grad_mode.h"
#include "tessera/core/thread_pool.h"
#include "tessera/ops/op.h"

namespace tessera::cpu {

namespace {

constexpr int64_t kNormGrain = 16384;  // elements per parallel chunk

template <typename T, bool HasWeight, bool HasBias>
void normalize_row(const T* __restrict x, T* __restrict y, const T* __restrict weight,
                   const T* __restrict bias, int64_t n, T mean, T rstd) {
  for (int64_t i = 0; i < n; ++i) {
    T value = (x[i] - mean) * rstd;
    if constexpr (HasWeight) value *= weight[i];
    if constexpr (HasBias) value += bias[i];
    y[i] = value;
  }
}

template <typename T, bool HasWeight, bool HasBias>
void layer_norm_rows(const T* x, T* y, const T* weight, const T* bias, T* means, T* rstds,
                     int64_t rows, int64_t n, double eps) {
  const int64_t grain = std::max<int64_t>(1, kNormGrain / std::max<int64_t>(n, 1));
  parallel_for(0, rows, grain, [&](int64_t lo, int64_t hi) {
    for (int64_t r = lo; r < hi; ++r) {
      const T* row = x + r * n;
      const double mean = rows::sum(row, n) / static_cast<double>(n);
      const double var = rows::squared_deviation(row, n, static_cast<T>(mean)) /
                         static_cast<double>(n);
      const double rstd = 1.0 / std::sqrt(var + eps);
      means[r] = static_cast<T>(mean);
      rstds[r] = static_cast<T>(rstd);
      normalize_row<T, HasWeight, HasBias>(row, y + r * n, weight, bias, n,
                                           static_cast<T>(mean), static_cast<T>(rstd));
    }
  });
}

template <typename T>
void layer_norm_impl(KernelContext& ctx) {
  const Attrs& attrs = ctx.attrs;
  const bool has_weight = attrs.b("has_weight"), has_bias = attrs.b("has_bias");
  NoGradGuard no_grad;
  const Tensor x = ctx.inputs[0].contiguous();
  const Tensor weight = has_weight ? ctx.inputs[1].contiguous() : Tensor();
  const Tensor bias = has_bias ? ctx.inputs[has_weight ? 2 : 1].contiguous() : Tensor();
  const int64_t n = numel(attrs.ints("normalized_shape"));
  const int64_t rows = ctx.outputs[1].numel();
  if (rows == 0) return;
  const T* pw = has_weight ? weight.data<T>() : nullptr;
  const T* pb = has_bias ? bias.data<T>() : nullptr;
  T* y = ctx.outputs[0].data<T>();
  T* means = ctx.outputs[1].data<T>();
  T* rstds = ctx.outputs[2].data<T>();
  const double eps = attrs.f("eps");
  const T* px = x.data<T>();
  if (has_weight && has_bias) {
    layer_norm_rows<T, true, true>(px, y, pw, pb, means, rstds, rows, n, eps);
  } else if (has_weight) {
    layer_norm_rows<T, true, false>(px, y, pw, pb, means, rstds, rows, n, eps);
  } else if (has_bias) {
    layer_norm_rows<T, false, true>(px, y, pw, pb, means, rstds, rows, n, eps);
  } else {
    layer_norm_rows<T, false, false>(px, y, pw, pb, means, rstds, rows, n, eps);
  }
}

void layer_norm_kernel(KernelContext& ctx) {
  TESSERA_DISPATCH_FLOATING(ctx.inputs[0].dtype(), "layer_norm",
                            [&] { layer_norm_impl<scalar_t>(ctx); });
}

TESSERA_REGISTER_KERNEL("layer_norm", cpu, layer_norm_kernel, ::tessera::DType::f32,
                        ::tessera::DType::f64);

}  // namespace

}  // namespace tessera::cpu
