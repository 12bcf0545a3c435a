// CPU kernels for the pooling ops (ops/pool.cpp). Every plane (the leading
// dims flattened) is pooled independently; planes run in parallel. Max
// pooling recomputes each window's argmax with PyTorch's rule: the first
// maximum, NaN winning.

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>
#include <vector>

#include "tessera/backend/cpu/loops.h"
#include "tessera/core/grad_mode.h"
#include "tessera/ops/op.h"

namespace tessera::cpu {

namespace {

struct PoolGeometry {
  int64_t planes, h, w, oh, ow, kh, kw, sh, sw, ph, pw, dh, dw;
};

PoolGeometry make_geometry(const Shape& input, const Shape& pooled, const Attrs& attrs) {
  const auto& kernel = attrs.ints("kernel_size");
  const auto& stride = attrs.ints("stride");
  const auto& padding = attrs.ints("padding");
  std::vector<int64_t> dilation =
      attrs.has("dilation") ? attrs.ints("dilation") : std::vector<int64_t>{1, 1};
  const size_t nd = input.size();
  int64_t planes = 1;
  for (size_t d = 0; d + 2 < nd; ++d) planes *= input[d];
  return {.planes = planes, .h = input[nd - 2], .w = input[nd - 1],
          .oh = pooled[nd - 2], .ow = pooled[nd - 1], .kh = kernel[0], .kw = kernel[1],
          .sh = stride[0], .sw = stride[1], .ph = padding[0], .pw = padding[1],
          .dh = dilation[0], .dw = dilation[1]};
}

Tensor dense(const Tensor& t) {
  NoGradGuard no_grad;
  return t.contiguous();
}

// Runs fn(plane) for every plane, in parallel.
template <typename Fn>
void for_each_plane(const PoolGeometry& g, Fn&& fn) {
  // In double: a huge kernel clipped to a small input must not overflow the estimate.
  const double work = std::max(1.0, static_cast<double>(g.oh) * static_cast<double>(g.ow) *
                                        static_cast<double>(std::min(g.kh, g.h + 2 * g.ph)) *
                                        static_cast<double>(std::min(g.kw, g.w + 2 * g.pw)));
  parallel_for(0, g.planes, std::max<int64_t>(1, static_cast<int64_t>(32768 / work)),
               [&](int64_t lo, int64_t hi) {
                 for (int64_t plane = lo; plane < hi; ++plane) fn(plane);
               });
}

using Ranges = std::vector<std::pair<int64_t, int64_t>>;

// For each output position along one dim: the [first, end) input positions
// its dilated window reads (first on the dilation grid, clipped to the input).
Ranges window_ranges(int64_t out, int64_t size, int64_t kernel, int64_t stride, int64_t pad,
                     int64_t dilation) {
  Ranges ranges;
  for (int64_t o = 0; o < out; ++o) {
    int64_t first = o * stride - pad;
    const int64_t end = std::min(first + (kernel - 1) * dilation + 1, size);
    // The first tap at or after 0, in one step (a padding of 2^40 must not loop).
    if (first < 0) first += (-first + dilation - 1) / dilation * dilation;
    ranges.emplace_back(first, end);
  }
  return ranges;
}

// PyTorch's rule lets every NaN take over, so the window's last NaN wins.
template <typename T>
int64_t last_nan(const T* x, const PoolGeometry& g, int64_t y0, int64_t y1, int64_t x0,
                 int64_t x1) {
  int64_t found = -1;
  for (int64_t iy = y0; iy < y1; iy += g.dh) {
    for (int64_t ix = x0; ix < x1; ix += g.dw) {
      if (std::isnan(x[iy * g.w + ix])) found = iy * g.w + ix;
    }
  }
  return found;
}

// Calls visit(output index, input index) with each window's first maximum
// of plane x (input index -1 when a dilated window holds no input element).
template <typename T, typename Visit>
void for_each_argmax(const T* x, const PoolGeometry& g, const Ranges& rows, const Ranges& cols,
                     Visit&& visit) {
  for (int64_t oy = 0; oy < g.oh; ++oy) {
    const auto [y0, y1] = rows[oy];
    for (int64_t ox = 0; ox < g.ow; ++ox) {
      const auto [x0, x1] = cols[ox];
      if (y0 >= y1 || x0 >= x1) {
        visit(oy * g.ow + ox, int64_t{-1});
        continue;
      }
      int64_t best = y0 * g.w + x0;
      T best_value = -std::numeric_limits<T>::infinity();
      bool any_nan = false;
      for (int64_t iy = y0; iy < y1; iy += g.dh) {
        const T* row = x + iy * g.w;
        for (int64_t ix = x0; ix < x1; ix += g.dw) {
          // Branch-free (masks and max instead of ifs): on random data a
          // branch here mispredicts about half the time.
          const T value = row[ix];
          const int64_t greater = -static_cast<int64_t>(value > best_value);
          best = ((iy * g.w + ix) & greater) | (best & ~greater);
          best_value = std::max(best_value, value);
          any_nan |= value != value;
        }
      }
      if (any_nan) best = last_nan(x, g, y0, y1, x0, x1);
      visit(oy * g.ow + ox, best);
    }
  }
}

// out[window] = source[argmax of x over the window]; max_pool2d is select(x, x).
template <typename T>
void max_select(const Tensor& x_in, const Tensor& source_in, Tensor& out, const PoolGeometry& g) {
  const Tensor x = dense(x_in), source = dense(source_in);
  const T* px = x.data<T>();
  const T* ps = source.data<T>();
  T* po = out.data<T>();
  const Ranges rows = window_ranges(g.oh, g.h, g.kh, g.sh, g.ph, g.dh);
  const Ranges cols = window_ranges(g.ow, g.w, g.kw, g.sw, g.pw, g.dw);
  for_each_plane(g, [&](int64_t plane) {
    const T* sp = ps + plane * g.h * g.w;
    T* op = po + plane * g.oh * g.ow;
    for_each_argmax(px + plane * g.h * g.w, g, rows, cols, [&](int64_t o, int64_t index) {
      op[o] = index < 0 ? -std::numeric_limits<T>::infinity() : sp[index];
    });
  });
}

template <typename T>
void max_backward(const Tensor& grad_in, const Tensor& x_in, Tensor& dx, const PoolGeometry& g) {
  const Tensor grad = dense(grad_in), x = dense(x_in);
  const T* pg = grad.data<T>();
  const T* px = x.data<T>();
  T* pd = dx.data<T>();
  const Ranges rows = window_ranges(g.oh, g.h, g.kh, g.sh, g.ph, g.dh);
  const Ranges cols = window_ranges(g.ow, g.w, g.kw, g.sw, g.pw, g.dw);
  for_each_plane(g, [&](int64_t plane) {
    const T* gp = pg + plane * g.oh * g.ow;
    T* dp = pd + plane * g.h * g.w;
    std::fill(dp, dp + g.h * g.w, T(0));
    for_each_argmax(px + plane * g.h * g.w, g, rows, cols, [&](int64_t o, int64_t index) {
      if (index >= 0) dp[index] += gp[o];
    });
  });
}

// Calls fn(y0, y1, x0, x1, divisor) with window (oy, ox) clipped to the input.
template <typename Fn>
void avg_window(const PoolGeometry& g, bool count_include_pad, int64_t oy, int64_t ox, Fn&& fn) {
  int64_t y0 = oy * g.sh - g.ph, x0 = ox * g.sw - g.pw;
  int64_t y1 = std::min(y0 + g.kh, g.h + g.ph), x1 = std::min(x0 + g.kw, g.w + g.pw);
  // In double: a window of a huge kernel over padding can exceed int64.
  const double padded_size = static_cast<double>(y1 - y0) * static_cast<double>(x1 - x0);
  y0 = std::max<int64_t>(y0, 0);
  x0 = std::max<int64_t>(x0, 0);
  y1 = std::min(y1, g.h);
  x1 = std::min(x1, g.w);
  const double divisor =
      count_include_pad ? padded_size : static_cast<double>((y1 - y0) * (x1 - x0));
  fn(y0, y1, x0, x1, divisor);
}

template <typename T>
void avg_forward(const Tensor& x_in, Tensor& out, const PoolGeometry& g, bool count_include_pad) {
  const Tensor x = dense(x_in);
  const T* px = x.data<T>();
  T* po = out.data<T>();
  for_each_plane(g, [&](int64_t plane) {
    const T* xp = px + plane * g.h * g.w;
    T* op = po + plane * g.oh * g.ow;
    for (int64_t oy = 0; oy < g.oh; ++oy) {
      for (int64_t ox = 0; ox < g.ow; ++ox) {
        avg_window(g, count_include_pad, oy, ox,
                   [&](int64_t y0, int64_t y1, int64_t x0, int64_t x1, double divisor) {
                     T total = 0;
                     for (int64_t iy = y0; iy < y1; ++iy) {
                       for (int64_t ix = x0; ix < x1; ++ix) total += xp[iy * g.w + ix];
                     }
                     op[oy * g.ow + ox] = total / static_cast<T>(divisor);
                   });
      }
    }
  });
}

template <typename T>
void avg_backward(const Tensor& grad_in, Tensor& dx, const PoolGeometry& g,
                  bool count_include_pad) {
  const Tensor grad = dense(grad_in);
  const T* pg = grad.data<T>();
  T* pd = dx.data<T>();
  for_each_plane(g, [&](int64_t plane) {
    const T* gp = pg + plane * g.oh * g.ow;
    T* dp = pd + plane * g.h * g.w;
    std::fill(dp, dp + g.h * g.w, T(0));
    for (int64_t oy = 0; oy < g.oh; ++oy) {
      for (int64_t ox = 0; ox < g.ow; ++ox) {
        avg_window(g, count_include_pad, oy, ox,
                   [&](int64_t y0, int64_t y1, int64_t x0, int64_t x1, double divisor) {
                     const T share = gp[oy * g.ow + ox] / static_cast<T>(divisor);
                     for (int64_t iy = y0; iy < y1; ++iy) {
                       for (int64_t ix = x0; ix < x1; ++ix) dp[iy * g.w + ix] += share;
                     }
                   });
      }
    }
  });
}

void max_pool_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.inputs[0];
  PoolGeometry g = make_geometry(x.shape(), ctx.outputs[0].shape(), ctx.attrs);
  TESSERA_DISPATCH_FLOATING(x.dtype(), "max_pool2d", [&] {
    max_select<scalar_t>(x, x, ctx.outputs[0], g);
  });
}

void max_pool_select_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.inputs[0];
  PoolGeometry g = make_geometry(x.shape(), ctx.outputs[0].shape(), ctx.attrs);
  TESSERA_DISPATCH_FLOATING(x.dtype(), "max_pool2d_select", [&] {
    max_select<scalar_t>(x, ctx.inputs[1], ctx.outputs[0], g);
  });
}

void max_pool_backward_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.inputs[1];
  PoolGeometry g = make_geometry(x.shape(), ctx.inputs[0].shape(), ctx.attrs);
  TESSERA_DISPATCH_FLOATING(x.dtype(), "max_pool2d_backward", [&] {
    max_backward<scalar_t>(ctx.inputs[0], x, ctx.outputs[0], g);
  });
}

void avg_pool_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.inputs[0];
  PoolGeometry g = make_geometry(x.shape(), ctx.outputs[0].shape(), ctx.attrs);
  TESSERA_DISPATCH_FLOATING(x.dtype(), "avg_pool2d", [&] {
    avg_forward<scalar_t>(x, ctx.outputs[0], g, ctx.attrs.b("count_include_pad"));
  });
}

void avg_pool_backward_kernel(KernelContext& ctx) {
  const Tensor& grad = ctx.inputs[0];
  PoolGeometry g = make_geometry(ctx.outputs[0].shape(), grad.shape(), ctx.attrs);
  TESSERA_DISPATCH_FLOATING(grad.dtype(), "avg_pool2d_backward", [&] {
    avg_backward<scalar_t>(grad, ctx.outputs[0], g, ctx.attrs.b("count_include_pad"));
  });
}

#define FLOATS ::tessera::DType::f32, ::tessera::DType::f64

TESSERA_REGISTER_KERNEL("max_pool2d", cpu, max_pool_kernel, FLOATS);
TESSERA_REGISTER_KERNEL("max_pool2d_select", cpu, max_pool_select_kernel, FLOATS);
TESSERA_REGISTER_KERNEL("max_pool2d_backward", cpu, max_pool_backward_kernel, FLOATS);
TESSERA_REGISTER_KERNEL("avg_pool2d", cpu, avg_pool_kernel, FLOATS);
TESSERA_REGISTER_KERNEL("avg_pool2d_backward", cpu, avg_pool_backward_kernel, FLOATS);

}  // namespace

}  // namespace tessera::cpu
