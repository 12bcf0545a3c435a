// CPU kernels for the pooling ops (ops/pool.cpp). Every plane (the leading
// dims flattened) is pooled independently; planes run in parallel. A window
// is a row range times a column range, computed once per dim from the attrs
// (a fixed kernel, or adaptive "output_size"). Max pooling recomputes each
// window's argmax with PyTorch's rule: the first maximum, NaN winning.

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "tessera/backend/cpu/loops.h"
#include "tessera/ops/op.h"

namespace tessera::cpu {

namespace {

// One output position's window along one dim: input positions [lo, hi) in
// steps of the dilation, and its size with padding counted (average pooling).
struct Window {
  int64_t lo, hi;
  double padded_size;
};
using Windows = std::vector<Window>;

struct PoolGeometry {
  int64_t planes, h, w, oh, ow, dh, dw;
  Windows rows, cols;
};

// Windows along one dim of size `size` for `out` outputs. Max pooling's
// windows step by the dilation and are clipped to the input; average
// pooling's also record the part of the padding they cover.
Windows make_windows(const Attrs& attrs, int dim, int64_t size, int64_t out, bool average) {
  Windows windows;
  windows.reserve(out);
  if (attrs.has("output_size")) {
    for (int64_t o = 0; o < out; ++o) {
      const int64_t lo = o * size / out, hi = ((o + 1) * size + out - 1) / out;
      windows.push_back({lo, hi, static_cast<double>(hi - lo)});
    }
    return windows;
  }
  const int64_t kernel = attrs.ints("kernel_size")[dim];
  const int64_t stride = attrs.ints("stride")[dim];
  const int64_t pad = attrs.ints("padding")[dim];
  const int64_t dilation = attrs.has("dilation") ? attrs.ints("dilation")[dim] : 1;
  for (int64_t o = 0; o < out; ++o) {
    int64_t first = o * stride - pad;
    if (average) {
      const int64_t end = std::min(first + kernel, size + pad);
      // In double: a window of a huge kernel over padding can exceed int64 when squared.
      const double padded_size = static_cast<double>(end - first);
      windows.push_back({std::max<int64_t>(first, 0), std::min(end, size), padded_size});
      continue;
    }
    const int64_t end = std::min(first + (kernel - 1) * dilation + 1, size);
    // The first tap at or after 0, in one step (a padding of 2^40 must not loop).
    if (first < 0) first += (-first + dilation - 1) / dilation * dilation;
    windows.push_back({first, end, 0.0});
  }
  return windows;
}

PoolGeometry make_geometry(const Shape& input, const Shape& pooled, const Attrs& attrs,
                           bool average) {
  const size_t nd = input.size();
  int64_t planes = 1;
  for (size_t d = 0; d + 2 < nd; ++d) planes *= input[d];
  std::vector<int64_t> dilation =
      attrs.has("dilation") ? attrs.ints("dilation") : std::vector<int64_t>{1, 1};
  PoolGeometry g{.planes = planes, .h = input[nd - 2], .w = input[nd - 1],
                 .oh = pooled[nd - 2], .ow = pooled[nd - 1], .dh = dilation[0],
                 .dw = dilation[1], .rows = {}, .cols = {}};
  g.rows = make_windows(attrs, 0, g.h, g.oh, average);
  g.cols = make_windows(attrs, 1, g.w, g.ow, average);
  return g;
}

// Runs fn(plane) for every plane, in parallel.
template <typename Fn>
void for_each_plane(const PoolGeometry& g, Fn&& fn) {
  // In double: a huge kernel clipped to a small input must not overflow the estimate.
  double window = 1.0;
  if (!g.rows.empty() && !g.cols.empty()) {
    // A middle window: edge windows are clipped by the padding.
    const Window& row = g.rows[g.rows.size() / 2];
    const Window& col = g.cols[g.cols.size() / 2];
    window = static_cast<double>(std::max<int64_t>(1, row.hi - row.lo)) *
             static_cast<double>(std::max<int64_t>(1, col.hi - col.lo));
  }
  const double work =
      std::max(1.0, static_cast<double>(g.oh) * static_cast<double>(g.ow) * window);
  parallel_for(0, g.planes, std::max<int64_t>(1, static_cast<int64_t>(32768 / work)),
               [&](int64_t lo, int64_t hi) {
                 for (int64_t plane = lo; plane < hi; ++plane) fn(plane);
               });
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
void for_each_argmax(const T* x, const PoolGeometry& g, Visit&& visit) {
  for (int64_t oy = 0; oy < g.oh; ++oy) {
    const int64_t y0 = g.rows[oy].lo, y1 = g.rows[oy].hi;
    for (int64_t ox = 0; ox < g.ow; ++ox) {
      const int64_t x0 = g.cols[ox].lo, x1 = g.cols[ox].hi;
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
// With `indices`, also writes each window's argmax (flat in its plane).
template <typename T>
void max_select(const Tensor& x, const Tensor& source, Tensor& out, Tensor* indices,
                const PoolGeometry& g) {
  const T* px = x.data<T>();
  const T* ps = source.data<T>();
  T* po = out.data<T>();
  int64_t* pi = indices != nullptr ? indices->data<int64_t>() : nullptr;
  for_each_plane(g, [&](int64_t plane) {
    const T* sp = ps + plane * g.h * g.w;
    T* op = po + plane * g.oh * g.ow;
    int64_t* ip = pi != nullptr ? pi + plane * g.oh * g.ow : nullptr;
    for_each_argmax(px + plane * g.h * g.w, g, [&](int64_t o, int64_t index) {
      op[o] = index < 0 ? -std::numeric_limits<T>::infinity() : sp[index];
      if (ip != nullptr) ip[o] = index;
    });
  });
}

template <typename T>
void max_backward(const Tensor& grad, const Tensor& x, Tensor& dx, const PoolGeometry& g) {
  const T* pg = grad.data<T>();
  const T* px = x.data<T>();
  T* pd = dx.data<T>();
  for_each_plane(g, [&](int64_t plane) {
    const T* gp = pg + plane * g.oh * g.ow;
    T* dp = pd + plane * g.h * g.w;
    std::fill(dp, dp + g.h * g.w, T(0));
    for_each_argmax(px + plane * g.h * g.w, g, [&](int64_t o, int64_t index) {
      if (index >= 0) dp[index] += gp[o];
    });
  });
}

// The divisor of average window (oy, ox).
struct Divisor {
  bool count_include_pad;
  double override_value;  // 0: none
  double operator()(const Window& row, const Window& col) const {
    if (override_value != 0) return override_value;
    if (count_include_pad) return row.padded_size * col.padded_size;
    return static_cast<double>((row.hi - row.lo) * (col.hi - col.lo));
  }
};

Divisor make_divisor(const Attrs& attrs) {
  return {.count_include_pad = attrs.has("count_include_pad") && attrs.b("count_include_pad"),
          .override_value = attrs.has("divisor_override")
                                ? static_cast<double>(attrs.i("divisor_override"))
                                : 0.0};
}

template <typename T>
void avg_forward(const Tensor& x, Tensor& out, const PoolGeometry& g, const Divisor& divisor) {
  const T* px = x.data<T>();
  T* po = out.data<T>();
  for_each_plane(g, [&](int64_t plane) {
    const T* xp = px + plane * g.h * g.w;
    T* op = po + plane * g.oh * g.ow;
    for (int64_t oy = 0; oy < g.oh; ++oy) {
      const Window& row = g.rows[oy];
      for (int64_t ox = 0; ox < g.ow; ++ox) {
        const Window& col = g.cols[ox];
        T total = 0;
        for (int64_t iy = row.lo; iy < row.hi; ++iy) {
          for (int64_t ix = col.lo; ix < col.hi; ++ix) total += xp[iy * g.w + ix];
        }
        op[oy * g.ow + ox] = total / static_cast<T>(divisor(row, col));
      }
    }
  });
}

template <typename T>
void avg_backward(const Tensor& grad, Tensor& dx, const PoolGeometry& g, const Divisor& divisor) {
  const T* pg = grad.data<T>();
  T* pd = dx.data<T>();
  for_each_plane(g, [&](int64_t plane) {
    const T* gp = pg + plane * g.oh * g.ow;
    T* dp = pd + plane * g.h * g.w;
    std::fill(dp, dp + g.h * g.w, T(0));
    for (int64_t oy = 0; oy < g.oh; ++oy) {
      const Window& row = g.rows[oy];
      for (int64_t ox = 0; ox < g.ow; ++ox) {
        const Window& col = g.cols[ox];
        const T share = gp[oy * g.ow + ox] / static_cast<T>(divisor(row, col));
        for (int64_t iy = row.lo; iy < row.hi; ++iy) {
          for (int64_t ix = col.lo; ix < col.hi; ++ix) dp[iy * g.w + ix] += share;
        }
      }
    }
  });
}

void max_pool_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.inputs[0];
  PoolGeometry g = make_geometry(x.shape(), ctx.outputs[0].shape(), ctx.attrs, false);
  Tensor* indices = ctx.outputs.size() > 1 ? &ctx.outputs[1] : nullptr;
  TESSERA_DISPATCH_FLOATING(x.dtype(), "max_pool2d", [&] {
    max_select<scalar_t>(x, x, ctx.outputs[0], indices, g);
  });
}

void max_pool_select_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.inputs[0];
  PoolGeometry g = make_geometry(x.shape(), ctx.outputs[0].shape(), ctx.attrs, false);
  TESSERA_DISPATCH_FLOATING(x.dtype(), "max_pool2d_select", [&] {
    max_select<scalar_t>(x, ctx.inputs[1], ctx.outputs[0], nullptr, g);
  });
}

void max_pool_backward_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.inputs[1];
  PoolGeometry g = make_geometry(x.shape(), ctx.inputs[0].shape(), ctx.attrs, false);
  TESSERA_DISPATCH_FLOATING(x.dtype(), "max_pool2d_backward", [&] {
    max_backward<scalar_t>(ctx.inputs[0], x, ctx.outputs[0], g);
  });
}

void avg_pool_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.inputs[0];
  PoolGeometry g = make_geometry(x.shape(), ctx.outputs[0].shape(), ctx.attrs, true);
  TESSERA_DISPATCH_FLOATING(x.dtype(), "avg_pool2d", [&] {
    avg_forward<scalar_t>(x, ctx.outputs[0], g, make_divisor(ctx.attrs));
  });
}

void avg_pool_backward_kernel(KernelContext& ctx) {
  const Tensor& grad = ctx.inputs[0];
  PoolGeometry g = make_geometry(ctx.outputs[0].shape(), grad.shape(), ctx.attrs, true);
  TESSERA_DISPATCH_FLOATING(grad.dtype(), "avg_pool2d_backward", [&] {
    avg_backward<scalar_t>(grad, ctx.outputs[0], g, make_divisor(ctx.attrs));
  });
}

#define FLOATS ::tessera::DType::f32, ::tessera::DType::f64

TESSERA_REGISTER_KERNEL("max_pool2d", cpu, max_pool_kernel, FLOATS);
TESSERA_REGISTER_KERNEL("max_pool2d_with_indices", cpu, max_pool_kernel, FLOATS);
TESSERA_REGISTER_KERNEL("adaptive_max_pool2d", cpu, max_pool_kernel, FLOATS);
TESSERA_REGISTER_KERNEL("max_pool2d_select", cpu, max_pool_select_kernel, FLOATS);
TESSERA_REGISTER_KERNEL("max_pool2d_backward", cpu, max_pool_backward_kernel, FLOATS);
TESSERA_REGISTER_KERNEL("avg_pool2d", cpu, avg_pool_kernel, FLOATS);
TESSERA_REGISTER_KERNEL("adaptive_avg_pool2d", cpu, avg_pool_kernel, FLOATS);
TESSERA_REGISTER_KERNEL("avg_pool2d_backward", cpu, avg_pool_backward_kernel, FLOATS);

}  // namespace

}  // namespace tessera::cpu
