// CPU kernels of the batch_norm primitives (ops/batch_norm.cpp). x is read
// as [N, C, L] (L: the product of the dims after the channel dim). Each
// reduction reads x (and grad) once: per-channel sums run over the channel's
// N planes of L contiguous values, in f32 lanes flushed to double per block;
// the sum of squares is taken around a per-channel shift (the channel's
// first value), so a large common offset does not cancel it away. The
// elementwise passes are one multiply-add per element.

#include <algorithm>
#include <cmath>
#include <vector>

#include "tessera/backend/cpu/row_math.h"
#include "tessera/core/grad_mode.h"
#include "tessera/core/thread_pool.h"
#include "tessera/ops/op.h"

namespace tessera::cpu {

namespace {

constexpr int64_t kGrain = 16384;  // elements per parallel chunk
// Planes shorter than this are summed row by row instead of plane by plane.
constexpr int64_t kMinPlane = 16;

struct Layout {
  int64_t n = 0, c = 0, l = 0;
};

Layout layout_of(const Tensor& x) {
  Layout layout;
  layout.n = x.size(0);
  layout.c = x.size(1);
  layout.l = 1;
  for (int64_t d = 2; d < x.dim(); ++d) layout.l *= x.size(d);
  return layout;
}

// Adds sum(x - shift) and sum((x - shift)^2) over x[0..n) to s1, s2.
template <typename T>
void shifted_moments(const T* __restrict x, int64_t n, T shift, double& s1, double& s2) {
  using rows::Pack;
  constexpr int64_t w = rows::kWidth<T>;
  const Pack<T> center = rows::splat(shift);
  for (int64_t block = 0; block < n; block += rows::kBlock) {
    const int64_t end = std::min(n, block + rows::kBlock);
    Pack<T> a0 = rows::splat(T(0)), a1 = a0, q0 = a0, q1 = a0;
    int64_t i = block;
    for (; i + 2 * w <= end; i += 2 * w) {
      const Pack<T> u = rows::load(x + i) - center, v = rows::load(x + i + w) - center;
      a0 += u;
      a1 += v;
      q0 += u * u;
      q1 += v * v;
    }
    T partial_sum = rows::horizontal_sum<T>(a0 + a1);
    T partial_squares = rows::horizontal_sum<T>(q0 + q1);
    for (; i < end; ++i) {
      const T u = x[i] - shift;
      partial_sum += u;
      partial_squares += u * u;
    }
    s1 += partial_sum;
    s2 += partial_squares;
  }
}

// Adds sum(g) and sum(g * (x - center)) over [0..n) to s1, s2.
template <typename T>
void gradient_sums(const T* __restrict g, const T* __restrict x, int64_t n, T center, double& s1,
                   double& s2) {
  using rows::Pack;
  constexpr int64_t w = rows::kWidth<T>;
  const Pack<T> mean = rows::splat(center);
  for (int64_t block = 0; block < n; block += rows::kBlock) {
    const int64_t end = std::min(n, block + rows::kBlock);
    Pack<T> a0 = rows::splat(T(0)), a1 = a0, p0 = a0, p1 = a0;
    int64_t i = block;
    for (; i + 2 * w <= end; i += 2 * w) {
      const Pack<T> u = rows::load(g + i), v = rows::load(g + i + w);
      a0 += u;
      a1 += v;
      p0 += u * (rows::load(x + i) - mean);
      p1 += v * (rows::load(x + i + w) - mean);
    }
    T partial_sum = rows::horizontal_sum<T>(a0 + a1);
    T partial_product = rows::horizontal_sum<T>(p0 + p1);
    for (; i < end; ++i) {
      partial_sum += g[i];
      partial_product += g[i] * (x[i] - center);
    }
    s1 += partial_sum;
    s2 += partial_product;
  }
}

// Two sums per channel: accumulate(offset, length, channel, s1, s2) adds a
// run of `length` contiguous values of one channel starting at `offset`.
// Long planes: one task per channel range, over its N planes. Short planes
// ([N, C] inputs): a fixed number of batch ranges (independent of the thread
// count, so are the results), each with its own partial sums.
template <typename Accumulate>
void channel_sums(const Layout& s, double* sums, double* squares, const Accumulate& accumulate) {
  if (s.l >= kMinPlane || s.n <= 1) {
    const int64_t grain = std::max<int64_t>(1, kGrain / std::max<int64_t>(s.n * s.l, 1));
    parallel_for(0, s.c, grain, [&](int64_t lo, int64_t hi) {
      for (int64_t c = lo; c < hi; ++c) {
        double s1 = 0, s2 = 0;
        for (int64_t n = 0; n < s.n; ++n) accumulate((n * s.c + c) * s.l, s.l, c, s1, s2);
        sums[c] = s1;
        squares[c] = s2;
      }
    });
    return;
  }
  constexpr int64_t kMaxTasks = 64;
  const int64_t tasks = std::clamp<int64_t>(s.n * s.c * s.l / kGrain, 1, std::min(s.n, kMaxTasks));
  std::vector<double> partial(static_cast<size_t>(2 * tasks * s.c), 0.0);
  parallel_for(0, tasks, 1, [&](int64_t lo, int64_t hi) {
    for (int64_t task = lo; task < hi; ++task) {
      double* p1 = partial.data() + 2 * task * s.c;
      double* p2 = p1 + s.c;
      for (int64_t n = s.n * task / tasks; n < s.n * (task + 1) / tasks; ++n) {
        for (int64_t c = 0; c < s.c; ++c) accumulate((n * s.c + c) * s.l, s.l, c, p1[c], p2[c]);
      }
    }
  });
  for (int64_t c = 0; c < s.c; ++c) {
    double s1 = 0, s2 = 0;
    for (int64_t task = 0; task < tasks; ++task) {
      s1 += partial[static_cast<size_t>(2 * task * s.c + c)];
      s2 += partial[static_cast<size_t>((2 * task + 1) * s.c + c)];
    }
    sums[c] = s1;
    squares[c] = s2;
  }
}

// Per-channel mean and 1/sqrt(var + eps) from stats: (sum, sum of squares)
// over `count` values in training, else the (mean, var) rows.
void moments(const Tensor& stats_tensor, bool training, int64_t count, double eps,
             std::vector<double>& mean, std::vector<double>& invstd) {
  const Tensor stats = stats_tensor.to(DType::f64).contiguous();
  const int64_t channels = stats.size(1);
  const double* p = stats.data<double>();
  mean.resize(static_cast<size_t>(channels));
  invstd.resize(static_cast<size_t>(channels));
  for (int64_t c = 0; c < channels; ++c) {
    double m = p[c], var = p[channels + c];
    if (training) {
      m = count > 0 ? p[c] / static_cast<double>(count) : 0.0;
      var = count > 0 ? std::max(0.0, p[channels + c] / static_cast<double>(count) - m * m) : 0.0;
    }
    mean[static_cast<size_t>(c)] = m;
    invstd[static_cast<size_t>(c)] = 1.0 / std::sqrt(var + eps);
  }
}

// y = a[c] * x + b[c] per plane (and the same for the input gradient, with
// a third term in x): out = a * u + b * v + k for the plane's channel.
template <typename T>
void per_channel_affine(const Layout& s, const T* u, const T* v, T* out, const std::vector<T>& a,
                        const std::vector<T>& b, const std::vector<T>& k) {
  const int64_t planes = s.n * s.c;
  const int64_t grain = std::max<int64_t>(1, kGrain / std::max<int64_t>(s.l, 1));
  parallel_for(0, planes, grain, [&](int64_t lo, int64_t hi) {
    for (int64_t p = lo; p < hi; ++p) {
      const size_t c = static_cast<size_t>(p % s.c);
      const T ac = a[c], bc = b[c], kc = k[c];
      const T* __restrict up = u + p * s.l;
      T* __restrict op = out + p * s.l;
      if (v == nullptr) {
        for (int64_t i = 0; i < s.l; ++i) op[i] = ac * up[i] + kc;
      } else {
        const T* __restrict vp = v + p * s.l;
        for (int64_t i = 0; i < s.l; ++i) op[i] = ac * up[i] + bc * vp[i] + kc;
      }
    }
  });
}

template <typename T>
void stats_impl(KernelContext& ctx) {
  NoGradGuard no_grad;
  const Tensor& x = ctx.inputs[0];
  const Layout s = layout_of(x);
  double* sums = ctx.outputs[0].data<double>();
  double* squares = sums + s.c;
  const T* px = x.data<T>();
  std::vector<T> shift(static_cast<size_t>(s.c), T(0));
  if (s.n * s.l > 0) {
    for (int64_t c = 0; c < s.c; ++c) shift[static_cast<size_t>(c)] = px[c * s.l];
  }
  channel_sums(s, sums, squares,
               [&](int64_t offset, int64_t length, int64_t c, double& s1, double& s2) {
                 shifted_moments(px + offset, length, shift[static_cast<size_t>(c)], s1, s2);
               });
  // Back from the shift: sum x = s1 + n k, sum x^2 = s2 + 2 k s1 + n k^2.
  const double count = static_cast<double>(s.n * s.l);
  for (int64_t c = 0; c < s.c; ++c) {
    const double k = shift[static_cast<size_t>(c)], s1 = sums[c];
    sums[c] = s1 + count * k;
    squares[c] = squares[c] + 2.0 * k * s1 + count * k * k;
  }
}

template <typename T>
void elemt_impl(KernelContext& ctx) {
  const Attrs& attrs = ctx.attrs;
  const bool has_weight = attrs.b("has_weight"), has_bias = attrs.b("has_bias");
  NoGradGuard no_grad;
  const Tensor& x = ctx.inputs[0];
  const Layout s = layout_of(x);
  if (x.numel() == 0) return;
  std::vector<double> mean, invstd;
  moments(ctx.inputs[1], attrs.b("training"), attrs.i("count"), attrs.f("eps"), mean, invstd);
  const Tensor weight = has_weight ? ctx.inputs[2].to(DType::f64).contiguous() : Tensor();
  const Tensor bias = has_bias ? ctx.inputs[has_weight ? 3 : 2].to(DType::f64).contiguous() : Tensor();
  std::vector<T> scale(static_cast<size_t>(s.c)), offset(static_cast<size_t>(s.c));
  for (int64_t c = 0; c < s.c; ++c) {
    const size_t i = static_cast<size_t>(c);
    const double a = invstd[i] * (has_weight ? weight.data<double>()[c] : 1.0);
    scale[i] = static_cast<T>(a);
    offset[i] = static_cast<T>((has_bias ? bias.data<double>()[c] : 0.0) - mean[i] * a);
  }
  per_channel_affine<T>(s, x.data<T>(), nullptr, ctx.outputs[0].data<T>(), scale, scale, offset);
}

// (sum of grad, sum of grad * xhat) per channel, in x's dtype.
template <typename T>
void backward_reduce_impl(KernelContext& ctx) {
  const Attrs& attrs = ctx.attrs;
  NoGradGuard no_grad;
  const Tensor& g = ctx.inputs[0];
  const Tensor& x = ctx.inputs[1];
  const Layout s = layout_of(x);
  std::vector<double> mean, invstd;
  moments(ctx.inputs[2], attrs.b("training"), attrs.i("count"), attrs.f("eps"), mean, invstd);
  std::vector<double> sums(static_cast<size_t>(s.c)), products(static_cast<size_t>(s.c));
  std::vector<T> center(static_cast<size_t>(s.c));
  for (size_t c = 0; c < center.size(); ++c) center[c] = static_cast<T>(mean[c]);
  const T* pg = g.data<T>();
  const T* px = x.data<T>();
  channel_sums(s, sums.data(), products.data(),
               [&](int64_t offset, int64_t length, int64_t c, double& s1, double& s2) {
                 gradient_sums(pg + offset, px + offset, length, center[static_cast<size_t>(c)],
                               s1, s2);
               });
  T* out = ctx.outputs[0].data<T>();
  for (int64_t c = 0; c < s.c; ++c) {
    const size_t i = static_cast<size_t>(c);
    out[c] = static_cast<T>(sums[i]);
    out[s.c + c] = static_cast<T>(products[i] * invstd[i]);
  }
}

// dx = weight * invstd * (grad - sum_g / n - xhat * sum_gxhat / n) in
// training, weight * invstd * grad with the running statistics.
template <typename T>
void backward_elemt_impl(KernelContext& ctx) {
  const Attrs& attrs = ctx.attrs;
  const bool training = attrs.b("training"), has_weight = attrs.b("has_weight");
  NoGradGuard no_grad;
  const Tensor& g = ctx.inputs[0];
  const Tensor& x = ctx.inputs[1];
  const Layout s = layout_of(x);
  if (x.numel() == 0) return;
  const int64_t count = attrs.i("count");
  std::vector<double> mean, invstd;
  moments(ctx.inputs[2], training, count, attrs.f("eps"), mean, invstd);
  const Tensor reduced = training ? ctx.inputs[3].to(DType::f64).contiguous() : Tensor();
  const Tensor weight =
      has_weight ? ctx.inputs[training ? 4 : 3].to(DType::f64).contiguous() : Tensor();
  std::vector<T> grad_scale(static_cast<size_t>(s.c)), x_scale(static_cast<size_t>(s.c)),
      offset(static_cast<size_t>(s.c));
  for (int64_t c = 0; c < s.c; ++c) {
    const size_t i = static_cast<size_t>(c);
    const double a = invstd[i] * (has_weight ? weight.data<double>()[c] : 1.0);
    double b = 0, k = 0;
    if (training) {
      const double n = static_cast<double>(count);
      const double mean_g = reduced.data<double>()[c] / n;
      const double mean_gxhat = reduced.data<double>()[s.c + c] / n;
      // a * (g - mean_g - (x - mean) * invstd * mean_gxhat)
      b = -a * invstd[i] * mean_gxhat;
      k = -a * mean_g - b * mean[i];
    }
    grad_scale[i] = static_cast<T>(a);
    x_scale[i] = static_cast<T>(b);
    offset[i] = static_cast<T>(k);
  }
  per_channel_affine<T>(s, g.data<T>(), training ? x.data<T>() : nullptr,
                        ctx.outputs[0].data<T>(), grad_scale, x_scale, offset);
}

// running = (1 - momentum) * running + momentum * batch, the variance unbiased.
template <typename T>
void update_stats_impl(KernelContext& ctx) {
  NoGradGuard no_grad;
  const Tensor& running_mean = ctx.inputs[0];
  const Tensor& running_var = ctx.inputs[1];
  const Tensor stats = ctx.inputs[2].to(DType::f64).contiguous();
  const int64_t channels = running_mean.numel();
  const double count = static_cast<double>(ctx.attrs.i("count"));
  const double momentum = ctx.attrs.f("momentum");
  const double* p = stats.data<double>();
  T* new_mean = ctx.outputs[0].data<T>();
  T* new_var = ctx.outputs[1].data<T>();
  for (int64_t c = 0; c < channels; ++c) {
    const double mean = p[c] / count;
    const double var = std::max(0.0, p[channels + c] / count - mean * mean);
    const double unbiased = count > 1 ? var * count / (count - 1) : var;
    new_mean[c] = static_cast<T>((1.0 - momentum) * static_cast<double>(running_mean.data<T>()[c]) +
                                 momentum * mean);
    new_var[c] = static_cast<T>((1.0 - momentum) * static_cast<double>(running_var.data<T>()[c]) +
                                momentum * unbiased);
  }
}

void stats_kernel(KernelContext& ctx) {
  TESSERA_DISPATCH_FLOATING(ctx.inputs[0].dtype(), "batch_norm_stats",
                            [&] { stats_impl<scalar_t>(ctx); });
}
void elemt_kernel(KernelContext& ctx) {
  TESSERA_DISPATCH_FLOATING(ctx.inputs[0].dtype(), "batch_norm_elemt",
                            [&] { elemt_impl<scalar_t>(ctx); });
}
void backward_reduce_kernel(KernelContext& ctx) {
  TESSERA_DISPATCH_FLOATING(ctx.inputs[1].dtype(), "batch_norm_backward_reduce",
                            [&] { backward_reduce_impl<scalar_t>(ctx); });
}
void backward_elemt_kernel(KernelContext& ctx) {
  TESSERA_DISPATCH_FLOATING(ctx.inputs[1].dtype(), "batch_norm_backward_elemt",
                            [&] { backward_elemt_impl<scalar_t>(ctx); });
}
void update_stats_kernel(KernelContext& ctx) {
  TESSERA_DISPATCH_FLOATING(ctx.inputs[0].dtype(), "batch_norm_update_stats",
                            [&] { update_stats_impl<scalar_t>(ctx); });
}

TESSERA_REGISTER_KERNEL("batch_norm_stats", cpu, stats_kernel, ::tessera::DType::f32,
                        ::tessera::DType::f64);
TESSERA_REGISTER_KERNEL("batch_norm_elemt", cpu, elemt_kernel, ::tessera::DType::f32,
                        ::tessera::DType::f64);
TESSERA_REGISTER_KERNEL("batch_norm_backward_reduce", cpu, backward_reduce_kernel,
                        ::tessera::DType::f32, ::tessera::DType::f64);
TESSERA_REGISTER_KERNEL("batch_norm_backward_elemt", cpu, backward_elemt_kernel,
                        ::tessera::DType::f32, ::tessera::DType::f64);
TESSERA_REGISTER_KERNEL("batch_norm_update_stats", cpu, update_stats_kernel,
                        ::tessera::DType::f32, ::tessera::DType::f64);

}  // namespace

}  // namespace tessera::cpu
