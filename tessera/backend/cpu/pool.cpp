// CPU kernels for the pooling ops (ops/pool.cpp). Every plane (the leading
// dims flattened) is pooled independently; planes run in parallel. Max
// pooling recomputes each window's argmax with PyTorch's rule: the first
// maximum, NaN winning.

#include <algorithm>
#include <cmath>
#include <limits>

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
  return {planes,    input[nd - 2], input[nd - 1], pooled[nd - 2], pooled[nd - 1],
          kernel[0], kernel[1],     stride[0],     stride[1],      padding[0],
          padding[1], dilation[0],  dilation[1]};
}

Tensor dense(const Tensor& t) {
  NoGradGuard no_grad;
  return t.contiguous();
}

// Runs fn(plane) for every plane, in parallel.
template <typename Fn>
void for_each_plane(const PoolGeometry& g, Fn&& fn) {
  const int64_t work = std::max<int64_t>(1, g.oh * g.ow * g.kh * g.kw);
  parallel_for(0, g.planes, std::max<int64_t>(1, 32768 / work), [&](int64_t lo, int64_t hi) {
    for (int64_t plane = lo; plane < hi; ++plane) fn(plane);
  });
}

// Index within its plane of window (oy, ox)'s first maximum of x, or -1
// when a dilated window straddling the padding holds no input element.
template <typename T>
int64_t window_argmax(const T* x, const PoolGeometry& g, int64_t oy, int64_t ox) {
  int64_t y0 = oy * g.sh - g.ph, x0 = ox * g.sw - g.pw;
  const int64_t y1 = std::min(y0 + (g.kh - 1) * g.dh + 1, g.h);
  const int64_t x1 = std::min(x0 + (g.kw - 1) * g.dw + 1, g.w);
  while (y0 < 0) y0 += g.dh;
  while (x0 < 0) x0 += g.dw;
  if (y0 >= y1 || x0 >= x1) return -1;
  int64_t best = y0 * g.w + x0;
  T best_value = -std::numeric_limits<T>::infinity();
  for (int64_t iy = y0; iy < y1; iy += g.dh) {
    for (int64_t ix = x0; ix < x1; ix += g.dw) {
      const T value = x[iy * g.w + ix];
      if (value > best_value || std::isnan(value)) {
        best_value = value;
        best = iy * g.w + ix;
      }
    }
  }
  return best;
}

// out[window] = source[argmax of x over the window]; max_pool2d is select(x, x).
template <typename T>
void max_select(const Tensor& x_in, const Tensor& source_in, Tensor& out, const PoolGeometry& g) {
  const Tensor x = dense(x_in), source = dense(source_in);
  const T* px = x.data<T>();
  const T* ps = source.data<T>();
  T* po = out.data<T>();
  for_each_plane(g, [&](int64_t plane) {
    const T* xp = px + plane * g.h * g.w;
    const T* sp = ps + plane * g.h * g.w;
    T* op = po + plane * g.oh * g.ow;
    for (int64_t oy = 0; oy < g.oh; ++oy) {
      for (int64_t ox = 0; ox < g.ow; ++ox) {
        const int64_t index = window_argmax(xp, g, oy, ox);
        op[oy * g.ow + ox] = index < 0 ? -std::numeric_limits<T>::infinity() : sp[index];
      }
    }
  });
}

template <typename T>
void max_backward(const Tensor& grad_in, const Tensor& x_in, Tensor& dx, const PoolGeometry& g) {
  const Tensor grad = dense(grad_in), x = dense(x_in);
  const T* pg = grad.data<T>();
  const T* px = x.data<T>();
  T* pd = dx.data<T>();
  for_each_plane(g, [&](int64_t plane) {
    const T* xp = px + plane * g.h * g.w;
    const T* gp = pg + plane * g.oh * g.ow;
    T* dp = pd + plane * g.h * g.w;
    std::fill(dp, dp + g.h * g.w, T(0));
    for (int64_t oy = 0; oy < g.oh; ++oy) {
      for (int64_t ox = 0; ox < g.ow; ++ox) {
        const int64_t index = window_argmax(xp, g, oy, ox);
        if (index >= 0) dp[index] += gp[oy * g.ow + ox];
      }
    }
  });
}

// Calls fn(y0, y1, x0, x1, divisor) with window (oy, ox) clipped to the input.
template <typename Fn>
void avg_window(const PoolGeometry& g, bool count_include_pad, int64_t oy, int64_t ox, Fn&& fn) {
  int64_t y0 = oy * g.sh - g.ph, x0 = ox * g.sw - g.pw;
  int64_t y1 = std::min(y0 + g.kh, g.h + g.ph), x1 = std::min(x0 + g.kw, g.w + g.pw);
  const int64_t padded_size = (y1 - y0) * (x1 - x0);
  y0 = std::max<int64_t>(y0, 0);
  x0 = std::max<int64_t>(x0, 0);
  y1 = std::min(y1, g.h);
  x1 = std::min(x1, g.w);
  const int64_t divisor = count_include_pad ? padded_size : (y1 - y0) * (x1 - x0);
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
                   [&](int64_t y0, int64_t y1, int64_t x0, int64_t x1, int64_t divisor) {
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
                   [&](int64_t y0, int64_t y1, int64_t x0, int64_t x1, int64_t divisor) {
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
