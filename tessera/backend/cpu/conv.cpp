// CPU kernels for conv2d and its gradient ops (ops/conv.cpp). f32 goes to
// oneDNN when Tessera is built with it (conv_dnnl.cpp; its direct kernels
// beat im2col + OpenBLAS clearly); f64 and the fallback use im2col + gemm: a
// chunk of images is unfolded in parallel (one image per task), then BLAS
// runs per image and group outside parallel_for.

#include <algorithm>
#include <cstring>

#include "tessera/backend/cpu/conv_internal.h"
#include "tessera/backend/cpu/gemm.h"
#include "tessera/backend/cpu/loops.h"
#include "tessera/ops/op.h"

namespace tessera::cpu {

namespace {

using Geometry = ConvGeometry;

Geometry make_geometry(const Shape& x, const Shape& weight, const Shape& out, const Attrs& attrs) {
  const auto& stride = attrs.ints("stride");
  const auto& padding = attrs.ints("padding");
  const auto& dilation = attrs.ints("dilation");
  return {.n = x[0], .c = x[1], .h = x[2], .w = x[3],
          .o = out[1], .kh = weight[2], .kw = weight[3], .oh = out[2], .ow = out[3],
          .sh = stride[0], .sw = stride[1], .ph = padding[0], .pw = padding[1],
          .dh = dilation[0], .dw = dilation[1], .groups = attrs.i("groups")};
}

#ifdef TESSERA_HAS_DNNL
// oneDNN rejects empty dims; those problems are trivial for the loops anyway.
bool use_dnnl(const Geometry& g) { return g.n > 0 && g.c > 0 && g.o > 0; }
#endif

// Output positions [lo, hi) whose input index o*stride - pad + offset lies in [0, size).
std::pair<int64_t, int64_t> valid_range(int64_t out, int64_t size, int64_t stride, int64_t pad,
                                        int64_t offset) {
  int64_t first = pad - offset;  // smallest o*stride that is in range
  int64_t lo = first <= 0 ? 0 : (first + stride - 1) / stride;
  int64_t last = size - 1 + pad - offset;  // largest o*stride in range
  int64_t hi = last < 0 ? 0 : last / stride + 1;
  return {std::min(lo, out), std::clamp(hi, std::min(lo, out), out)};
}

// Unfolds image x [C, H, W] into col [C * kh * kw, OH * OW].
template <typename T>
void im2col(const T* x, T* col, const Geometry& g) {
  const int64_t pixels = g.pixels();
  for (int64_t c = 0; c < g.c; ++c) {
    for (int64_t ky = 0; ky < g.kh; ++ky) {
      for (int64_t kx = 0; kx < g.kw; ++kx) {
        T* row = col + ((c * g.kh + ky) * g.kw + kx) * pixels;
        auto [x_lo, x_hi] = valid_range(g.ow, g.w, g.sw, g.pw, kx * g.dw);
        for (int64_t oy = 0; oy < g.oh; ++oy) {
          T* dst = row + oy * g.ow;
          const int64_t iy = oy * g.sh - g.ph + ky * g.dh;
          if (iy < 0 || iy >= g.h) {
            std::fill(dst, dst + g.ow, T(0));
            continue;
          }
          const T* src = x + (c * g.h + iy) * g.w - g.pw + kx * g.dw;
          std::fill(dst, dst + x_lo, T(0));
          if (g.sw == 1) {
            std::copy(src + x_lo, src + x_hi, dst + x_lo);
          } else {
            for (int64_t ox = x_lo; ox < x_hi; ++ox) dst[ox] = src[ox * g.sw];
          }
          std::fill(dst + x_hi, dst + g.ow, T(0));
        }
      }
    }
  }
}

// Folds col [C * kh * kw, OH * OW] back into image dx [C, H, W] (summing overlaps).
template <typename T>
void col2im(const T* col, T* dx, const Geometry& g) {
  const int64_t pixels = g.pixels();
  std::fill(dx, dx + g.c * g.h * g.w, T(0));
  for (int64_t c = 0; c < g.c; ++c) {
    for (int64_t ky = 0; ky < g.kh; ++ky) {
      for (int64_t kx = 0; kx < g.kw; ++kx) {
        const T* row = col + ((c * g.kh + ky) * g.kw + kx) * pixels;
        auto [x_lo, x_hi] = valid_range(g.ow, g.w, g.sw, g.pw, kx * g.dw);
        for (int64_t oy = 0; oy < g.oh; ++oy) {
          const int64_t iy = oy * g.sh - g.ph + ky * g.dh;
          if (iy < 0 || iy >= g.h) continue;
          const T* src = row + oy * g.ow;
          T* dst = dx + (c * g.h + iy) * g.w - g.pw + kx * g.dw;
          if (g.sw == 1) {
            for (int64_t ox = x_lo; ox < x_hi; ++ox) dst[ox] += src[ox];
          } else {
            for (int64_t ox = x_lo; ox < x_hi; ++ox) dst[ox * g.sw] += src[ox];
          }
        }
      }
    }
  }
}

// C = A * B (+ C when accumulate), with an empty inner dim giving zeros.
template <typename T>
void gemm_or_zero(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const T* a, int64_t lda,
                  const T* b, int64_t ldb, bool accumulate, T* c, int64_t ldc) {
  if (m == 0 || n == 0) return;
  if (k == 0) {
    if (!accumulate) {
      for (int64_t i = 0; i < m; ++i) std::fill(c + i * ldc, c + i * ldc + n, T(0));
    }
    return;
  }
  gemm<T>(ta, tb, m, n, k, T(1), a, lda, b, ldb, accumulate ? T(1) : T(0), c, ldc);
}

// Images per chunk so a chunk's unfolded inputs stay within a few MiB.
int64_t chunk_images(const Geometry& g, size_t element_size) {
  const int64_t per_image = std::max<int64_t>(1, g.c * g.kh * g.kw * g.pixels()) *
                            static_cast<int64_t>(element_size);
  return std::clamp<int64_t>((int64_t{4} << 20) / per_image, 1, std::max<int64_t>(g.n, 1));
}

// Runs body(first, count, col) over chunks of images after unfolding each
// chunk's images into col (image i of the chunk at col + i * image_size).
template <typename T, typename Body>
void for_each_unfolded_chunk(const T* x, const Geometry& g, Workspace& workspace, Body&& body) {
  const int64_t image_size = g.c * g.kh * g.kw * g.pixels();
  const int64_t chunk = chunk_images(g, sizeof(T));
  T* col = workspace.allocate_as<T>(chunk * image_size);
  for (int64_t first = 0; first < g.n; first += chunk) {
    const int64_t count = std::min(chunk, g.n - first);
    parallel_for(0, count, 1, [&](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i) {
        im2col(x + (first + i) * g.c * g.h * g.w, col + i * image_size, g);
      }
    });
    body(first, count, col);
  }
}

template <typename T>
void add_bias(T* out, const T* bias, const Geometry& g, int64_t first, int64_t count) {
  const int64_t pixels = g.pixels();
  parallel_for(first * g.o, (first + count) * g.o, std::max<int64_t>(1, 8192 / pixels),
               [&](int64_t lo, int64_t hi) {
                 for (int64_t plane = lo; plane < hi; ++plane) {
                   const T value = bias[plane % g.o];
                   T* dst = out + plane * pixels;
                   for (int64_t p = 0; p < pixels; ++p) dst[p] += value;
                 }
               });
}

template <typename T>
void conv2d_forward(const Tensor& x, const Tensor& weight, const Tensor* bias, Tensor& out,
                    const Geometry& g, Workspace& workspace) {
  const T* px = x.data<T>();
  const T* pw = weight.data<T>();
  T* po = out.data<T>();
  const int64_t pixels = g.pixels(), rows = g.group_rows(), og = g.group_outputs();
  const T* pb = bias ? bias->data<T>() : nullptr;
#ifdef TESSERA_HAS_DNNL
  if constexpr (std::is_same_v<T, float>) {
    if (use_dnnl(g) && dnnl_conv_forward(g, px, pw, pb, po, workspace)) return;
  }
#endif
  auto gemm_image = [&](int64_t n, const T* col) {
    for (int64_t grp = 0; grp < g.groups; ++grp) {
      gemm_or_zero<T>(false, false, og, pixels, rows, pw + grp * og * rows, rows,
                      col + grp * rows * pixels, pixels, false,
                      po + (n * g.o + grp * og) * pixels, pixels);
    }
  };
  if (g.pointwise()) {
    for (int64_t n = 0; n < g.n; ++n) gemm_image(n, px + n * g.c * pixels);
    if (pb) add_bias(po, pb, g, 0, g.n);
    return;
  }
  for_each_unfolded_chunk(px, g, workspace, [&](int64_t first, int64_t count, const T* col) {
    const int64_t image_size = g.c * g.kh * g.kw * pixels;
    for (int64_t i = 0; i < count; ++i) gemm_image(first + i, col + i * image_size);
    if (pb) add_bias(po, pb, g, first, count);
  });
}

template <typename T>
void conv2d_input_grad(const Tensor& grad, const Tensor& weight, Tensor& dx, const Geometry& g,
                       Workspace& workspace) {
  const T* pg = grad.data<T>();
  const T* pw = weight.data<T>();
  T* pdx = dx.data<T>();
#ifdef TESSERA_HAS_DNNL
  if constexpr (std::is_same_v<T, float>) {
    if (use_dnnl(g) && dnnl_conv_backward_data(g, pg, pw, pdx, workspace)) return;
  }
#endif
  const int64_t pixels = g.pixels(), rows = g.group_rows(), og = g.group_outputs();
  // col = W_group^T * grad_group for every group of one image.
  auto gemm_image = [&](int64_t n, T* col) {
    for (int64_t grp = 0; grp < g.groups; ++grp) {
      gemm_or_zero<T>(true, false, rows, pixels, og, pw + grp * og * rows, rows,
                      pg + (n * g.o + grp * og) * pixels, pixels, false,
                      col + grp * rows * pixels, pixels);
    }
  };
  const int64_t image_in = g.c * g.h * g.w;
  if (g.pointwise()) {
    for (int64_t n = 0; n < g.n; ++n) gemm_image(n, pdx + n * image_in);
    return;
  }
  const int64_t image_size = g.c * g.kh * g.kw * pixels;
  const int64_t chunk = chunk_images(g, sizeof(T));
  T* col = workspace.allocate_as<T>(chunk * image_size);
  for (int64_t first = 0; first < g.n; first += chunk) {
    const int64_t count = std::min(chunk, g.n - first);
    for (int64_t i = 0; i < count; ++i) gemm_image(first + i, col + i * image_size);
    parallel_for(0, count, 1, [&](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i) {
        col2im(col + i * image_size, pdx + (first + i) * image_in, g);
      }
    });
  }
}

template <typename T>
void conv2d_weight_grad(const Tensor& x, const Tensor& grad, Tensor& dw, const Geometry& g,
                        Workspace& workspace) {
  const T* px = x.data<T>();
  const T* pg = grad.data<T>();
  T* pdw = dw.data<T>();
  const int64_t pixels = g.pixels(), rows = g.group_rows(), og = g.group_outputs();
  if (g.n == 0) {
    std::fill(pdw, pdw + dw.numel(), T(0));
    return;
  }
#ifdef TESSERA_HAS_DNNL
  if constexpr (std::is_same_v<T, float>) {
    if (use_dnnl(g) && dnnl_conv_backward_weights(g, px, pg, pdw, workspace)) return;
  }
#endif
  // dW_group (+)= grad_group * col_group^T for every group of one image.
  auto gemm_image = [&](int64_t n, const T* col) {
    for (int64_t grp = 0; grp < g.groups; ++grp) {
      gemm_or_zero<T>(false, true, og, rows, pixels, pg + (n * g.o + grp * og) * pixels, pixels,
                      col + grp * rows * pixels, pixels, n > 0, pdw + grp * og * rows, rows);
    }
  };
  if (g.pointwise()) {
    for (int64_t n = 0; n < g.n; ++n) gemm_image(n, px + n * g.c * pixels);
    return;
  }
  for_each_unfolded_chunk(px, g, workspace, [&](int64_t first, int64_t count, const T* col) {
    const int64_t image_size = g.c * g.kh * g.kw * pixels;
    for (int64_t i = 0; i < count; ++i) gemm_image(first + i, col + i * image_size);
  });
}

void conv2d_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.inputs[0];
  const Tensor& w = ctx.inputs[1];
  const Tensor* bias = ctx.inputs.size() == 3 ? &ctx.inputs[2] : nullptr;
  Tensor& out = ctx.outputs[0];
  if (out.numel() == 0) return;
  Geometry g = make_geometry(x.shape(), w.shape(), out.shape(), ctx.attrs);
  TESSERA_DISPATCH_FLOATING(x.dtype(), "conv2d",
                            [&] { conv2d_forward<scalar_t>(x, w, bias, out, g, ctx.workspace); });
}

void conv2d_backward_input_kernel(KernelContext& ctx) {
  const Tensor& grad = ctx.inputs[0];
  const Tensor& w = ctx.inputs[1];
  Tensor& dx = ctx.outputs[0];
  if (dx.numel() == 0) return;
  Geometry g = make_geometry(dx.shape(), w.shape(), grad.shape(), ctx.attrs);
  TESSERA_DISPATCH_FLOATING(grad.dtype(), "conv2d_backward_input",
                            [&] { conv2d_input_grad<scalar_t>(grad, w, dx, g, ctx.workspace); });
}

void conv2d_backward_weight_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.inputs[0];
  const Tensor& grad = ctx.inputs[1];
  Tensor& dw = ctx.outputs[0];
  if (dw.numel() == 0) return;
  Geometry g = make_geometry(x.shape(), dw.shape(), grad.shape(), ctx.attrs);
  TESSERA_DISPATCH_FLOATING(x.dtype(), "conv2d_backward_weight",
                            [&] { conv2d_weight_grad<scalar_t>(x, grad, dw, g, ctx.workspace); });
}

// unfold (im2col) and fold (col2im), ops/unfold.cpp: [N, C, H, W] and
// [N, C * kh * kw, OH * OW], one image per task.
Geometry window_geometry(const Shape& image, const Attrs& attrs) {
  const auto& kernel = attrs.ints("kernel_size");
  const auto& stride = attrs.ints("stride");
  const auto& padding = attrs.ints("padding");
  const auto& dilation = attrs.ints("dilation");
  const int64_t oh =
      window_output_size(image[2], kernel[0], stride[0], padding[0], dilation[0], "unfold");
  const int64_t ow =
      window_output_size(image[3], kernel[1], stride[1], padding[1], dilation[1], "unfold");
  return {.n = image[0], .c = image[1], .h = image[2], .w = image[3],
          .o = image[1] * kernel[0] * kernel[1], .kh = kernel[0], .kw = kernel[1],
          .oh = oh, .ow = ow, .sh = stride[0], .sw = stride[1], .ph = padding[0],
          .pw = padding[1], .dh = dilation[0], .dw = dilation[1], .groups = 1};
}

template <typename Fn>
void for_each_image(const Geometry& g, Fn&& fn) {
  const int64_t work = std::max<int64_t>(1, g.o * g.pixels());
  parallel_for(0, g.n, std::max<int64_t>(1, 32768 / work), [&](int64_t lo, int64_t hi) {
    for (int64_t n = lo; n < hi; ++n) fn(n);
  });
}

void unfold_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.inputs[0];
  Tensor& out = ctx.outputs[0];
  if (out.numel() == 0) return;
  Geometry g = window_geometry(x.shape(), ctx.attrs);
  TESSERA_DISPATCH_FLOATING(x.dtype(), "unfold", [&] {
    const scalar_t* px = x.data<scalar_t>();
    scalar_t* po = out.data<scalar_t>();
    for_each_image(g, [&](int64_t n) {
      im2col(px + n * g.c * g.h * g.w, po + n * g.o * g.pixels(), g);
    });
  });
}

void fold_kernel(KernelContext& ctx) {
  const Tensor& col = ctx.inputs[0];
  Tensor& out = ctx.outputs[0];
  if (out.numel() == 0) return;
  Geometry g = window_geometry(out.shape(), ctx.attrs);
  TESSERA_DISPATCH_FLOATING(col.dtype(), "fold", [&] {
    const scalar_t* pc = col.data<scalar_t>();
    scalar_t* po = out.data<scalar_t>();
    for_each_image(g, [&](int64_t n) {
      col2im(pc + n * g.o * g.pixels(), po + n * g.c * g.h * g.w, g);
    });
  });
}

TESSERA_REGISTER_KERNEL("unfold", cpu, unfold_kernel, ::tessera::DType::f32,
                        ::tessera::DType::f64);
TESSERA_REGISTER_KERNEL("fold", cpu, fold_kernel, ::tessera::DType::f32, ::tessera::DType::f64);
TESSERA_REGISTER_KERNEL("conv2d", cpu, conv2d_kernel, ::tessera::DType::f32,
                        ::tessera::DType::f64);
TESSERA_REGISTER_KERNEL("conv2d_backward_input", cpu, conv2d_backward_input_kernel,
                        ::tessera::DType::f32, ::tessera::DType::f64);
TESSERA_REGISTER_KERNEL("conv2d_backward_weight", cpu, conv2d_backward_weight_kernel,
                        ::tessera::DType::f32, ::tessera::DType::f64);

}  // namespace

}  // namespace tessera::cpu
