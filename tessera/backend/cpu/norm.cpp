// CPU kernels for layer_norm and layer_norm_backward (ops/norm.cpp). Rows of
// the normalised size are read from memory once and re-read from cache: the
// forward takes the mean, then the variance around it (two passes, so no
// cancellation), then writes the output; the backward takes two row sums and
// then writes dx while accumulating the parameter gradients per task.

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
      const double var =
          rows::squared_deviation(row, n, static_cast<T>(mean)) / static_cast<double>(n);
      const double rstd = 1.0 / std::sqrt(var + eps);
      means[r] = static_cast<T>(mean);
      rstds[r] = static_cast<T>(rstd);
      normalize_row<T, HasWeight, HasBias>(row, y + r * n, weight, bias, n, static_cast<T>(mean),
                                           static_cast<T>(rstd));
    }
  });
}

template <typename T>
void layer_norm_impl(KernelContext& ctx) {
  const Attrs& attrs = ctx.attrs;
  const bool has_weight = attrs.b("has_weight"), has_bias = attrs.b("has_bias");
  NoGradGuard no_grad;
  const Tensor& x = ctx.inputs[0];
  const Tensor weight = has_weight ? ctx.inputs[1] : Tensor();
  const Tensor bias = has_bias ? ctx.inputs[has_weight ? 2 : 1] : Tensor();
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

// Row sums of a = grad * weight and of a * xhat, in double across blocks.
template <typename T, bool HasWeight>
void backward_row_sums(const T* __restrict g, const T* __restrict x, const T* __restrict weight,
                       int64_t n, T mean, T rstd, double& sum_a, double& sum_ax) {
  using rows::Pack;
  constexpr int64_t w = rows::kWidth<T>;
  const Pack<T> mv = rows::splat(mean), rv = rows::splat(rstd);
  sum_a = 0;
  sum_ax = 0;
  for (int64_t block = 0; block < n; block += rows::kBlock) {
    const int64_t end = std::min(n, block + rows::kBlock);
    Pack<T> a0 = rows::splat(T(0)), a1 = a0, ax0 = a0, ax1 = a0;
    int64_t i = block;
    for (; i + 2 * w <= end; i += 2 * w) {
      Pack<T> u = rows::load(g + i), v = rows::load(g + i + w);
      if constexpr (HasWeight) {
        u *= rows::load(weight + i);
        v *= rows::load(weight + i + w);
      }
      a0 += u;
      a1 += v;
      ax0 += u * ((rows::load(x + i) - mv) * rv);
      ax1 += v * ((rows::load(x + i + w) - mv) * rv);
    }
    T partial_a = rows::horizontal_sum<T>(a0 + a1);
    T partial_ax = rows::horizontal_sum<T>(ax0 + ax1);
    for (; i < end; ++i) {
      const T a = HasWeight ? g[i] * weight[i] : g[i];
      partial_a += a;
      partial_ax += a * ((x[i] - mean) * rstd);
    }
    sum_a += partial_a;
    sum_ax += partial_ax;
  }
}

template <typename T, bool HasWeight>
void backward_row(const T* __restrict g, const T* __restrict x, const T* __restrict weight,
                  T* __restrict dx, T* __restrict gamma, T* __restrict beta, int64_t n, T mean,
                  T rstd) {
  double sum_a, sum_ax;
  backward_row_sums<T, HasWeight>(g, x, weight, n, mean, rstd, sum_a, sum_ax);
  const T a_mean = static_cast<T>(sum_a / static_cast<double>(n));
  const T ax_mean = static_cast<T>(sum_ax / static_cast<double>(n));
  for (int64_t i = 0; i < n; ++i) {
    const T xhat = (x[i] - mean) * rstd;
    const T a = HasWeight ? g[i] * weight[i] : g[i];
    dx[i] = rstd * (a - a_mean - xhat * ax_mean);
    gamma[i] += g[i] * xhat;
    beta[i] += g[i];
  }
}

// Fixed task count (independent of the thread count, so results are too):
// each task owns a row range and its own dgamma / dbeta partial rows.
template <typename T, bool HasWeight>
void layer_norm_backward_rows(const T* g, const T* x, const T* weight, const T* means,
                              const T* rstds, T* dx, T* gamma, T* beta, int64_t rows, int64_t n,
                              Workspace& workspace) {
  constexpr int64_t kMaxTasks = 64;
  const int64_t tasks = std::clamp<int64_t>(rows * n / kNormGrain, 1, std::min(rows, kMaxTasks));
  // The kernel's workspace: a graph plans it in its arena; eagerly it comes
  // from the caching allocator (a fresh std::vector this large would be
  // mmapped and page-faulted on every call).
  T* partial_gamma = workspace.allocate_as<T>(2 * tasks * n);
  T* partial_beta = partial_gamma + tasks * n;
  std::fill(partial_gamma, partial_gamma + 2 * tasks * n, T(0));
  parallel_for(0, tasks, 1, [&](int64_t lo, int64_t hi) {
    for (int64_t task = lo; task < hi; ++task) {
      T* pg = partial_gamma + task * n;
      T* pb = partial_beta + task * n;
      for (int64_t r = rows * task / tasks; r < rows * (task + 1) / tasks; ++r) {
        backward_row<T, HasWeight>(g + r * n, x + r * n, weight, dx + r * n, pg, pb, n, means[r],
                                   rstds[r]);
      }
    }
  });
  for (int64_t i = 0; i < n; ++i) {
    double total_gamma = 0, total_beta = 0;
    for (int64_t task = 0; task < tasks; ++task) {
      total_gamma += partial_gamma[task * n + i];
      total_beta += partial_beta[task * n + i];
    }
    gamma[i] = static_cast<T>(total_gamma);
    beta[i] = static_cast<T>(total_beta);
  }
}

template <typename T>
void layer_norm_backward_impl(KernelContext& ctx) {
  const bool has_weight = ctx.attrs.b("has_weight");
  NoGradGuard no_grad;
  const Tensor& g = ctx.inputs[0];
  const Tensor& x = ctx.inputs[1];
  const Tensor& means = ctx.inputs[2];
  const Tensor& rstds = ctx.inputs[3];
  const Tensor weight = has_weight ? ctx.inputs[4] : Tensor();
  const int64_t n = numel(ctx.attrs.ints("normalized_shape"));
  const int64_t rows = means.numel();
  T* gamma = ctx.outputs[1].data<T>();
  T* beta = ctx.outputs[2].data<T>();
  if (rows == 0 || n == 0) {
    std::fill(gamma, gamma + n, T(0));
    std::fill(beta, beta + n, T(0));
    return;
  }
  T* dx = ctx.outputs[0].data<T>();
  if (has_weight) {
    layer_norm_backward_rows<T, true>(g.data<T>(), x.data<T>(), weight.data<T>(), means.data<T>(),
                                      rstds.data<T>(), dx, gamma, beta, rows, n, ctx.workspace);
  } else {
    layer_norm_backward_rows<T, false>(g.data<T>(), x.data<T>(), nullptr, means.data<T>(),
                                       rstds.data<T>(), dx, gamma, beta, rows, n, ctx.workspace);
  }
}

void layer_norm_backward_kernel(KernelContext& ctx) {
  TESSERA_DISPATCH_FLOATING(ctx.inputs[1].dtype(), "layer_norm_backward",
                            [&] { layer_norm_backward_impl<scalar_t>(ctx); });
}

void layer_norm_kernel(KernelContext& ctx) {
  TESSERA_DISPATCH_FLOATING(ctx.inputs[0].dtype(), "layer_norm",
                            [&] { layer_norm_impl<scalar_t>(ctx); });
}

TESSERA_REGISTER_KERNEL("layer_norm", cpu, layer_norm_kernel, ::tessera::DType::f32,
                        ::tessera::DType::f64);
TESSERA_REGISTER_KERNEL("layer_norm_backward", cpu, layer_norm_backward_kernel,
                        ::tessera::DType::f32, ::tessera::DType::f64);

}  // namespace

}  // namespace tessera::cpu
