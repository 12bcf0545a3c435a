// CPU kernels for scans and sorting (ops/scan.cpp). The input, made
// contiguous, is viewed as [outer, size, inner]; each of the outer * inner
// lines along the dim is independent and runs as one task.

#include <algorithm>
#include <cmath>
#include <numeric>
#include <utility>
#include <vector>

#include "tessera/backend/cpu/loops.h"
#include "tessera/backend/cpu/vec_math.h"
#include "tessera/core/grad_mode.h"
#include "tessera/core/thread_pool.h"
#include "tessera/ops/op.h"

namespace tessera::cpu {

namespace {

struct Lines {
  int64_t outer = 1, size = 1, inner = 1;
  int64_t count() const { return outer * inner; }
  // Offset of element 0 of line `l`; consecutive elements are `inner` apart.
  int64_t start(int64_t l) const { return (l / inner) * size * inner + l % inner; }
};

Lines lines_of(const Shape& shape, int64_t dim) {
  Lines lines;
  for (int64_t d = 0; d < dim; ++d) lines.outer *= shape[d];
  lines.size = shape[dim];
  for (int64_t d = dim + 1; d < static_cast<int64_t>(shape.size()); ++d) lines.inner *= shape[d];
  return lines;
}

// Work per task chosen so that short lines are batched.
int64_t grain_for(const Lines& lines) {
  return std::max<int64_t>(1, 16384 / std::max<int64_t>(1, lines.size));
}

template <typename T> struct Acc { using type = T; };
template <> struct Acc<float> { using type = double; };

template <typename T, bool Product>
void scan_impl(const Tensor& input, Tensor& out, int64_t dim, bool reverse) {
  if (out.numel() == 0) return;
  NoGradGuard no_grad;
  const Tensor& x = input;  // contiguous: the op asks the dispatcher
  const Lines lines = lines_of(x.shape(), dim);
  const T* px = x.data<T>();
  T* po = out.data<T>();
  parallel_for(0, lines.count(), grain_for(lines), [&](int64_t lo, int64_t hi) {
    for (int64_t l = lo; l < hi; ++l) {
      const int64_t base = lines.start(l);
      typename Acc<T>::type running = Product ? 1 : 0;
      for (int64_t k = 0; k < lines.size; ++k) {
        const int64_t i = base + (reverse ? lines.size - 1 - k : k) * lines.inner;
        if constexpr (Product) {
          running = wrapping_mul(running, static_cast<typename Acc<T>::type>(px[i]));
        } else {
          running = wrapping_add(running, static_cast<typename Acc<T>::type>(px[i]));
        }
        po[i] = static_cast<T>(running);
      }
    }
  });
}

template <bool Product>
void scan_kernel(KernelContext& ctx) {
  const bool reverse = ctx.attrs.has("reverse") && ctx.attrs.b("reverse");
  TESSERA_DISPATCH_NUMERIC(ctx.inputs[0].dtype(), ctx.op.name, [&] {
    scan_impl<scalar_t, Product>(ctx.inputs[0], ctx.outputs[0], ctx.attrs.i("dim"), reverse);
  });
}

// grad_k = prod_{j<k} x_j * S_k with S_k = g_k + x_{k+1} * S_{k+1}: exact
// with zeros anywhere in the line, no division.
template <typename T>
void cumprod_backward_impl(const Tensor& grad, const Tensor& input, Tensor& out, int64_t dim) {
  if (out.numel() == 0) return;
  NoGradGuard no_grad;
  const Tensor& g = grad;  // contiguous: the op asks the dispatcher
  const Tensor& x = input;
  const Lines lines = lines_of(x.shape(), dim);
  const T* pg = g.data<T>();
  const T* px = x.data<T>();
  T* po = out.data<T>();
  parallel_for(0, lines.count(), grain_for(lines), [&](int64_t lo, int64_t hi) {
    std::vector<T> suffix(static_cast<size_t>(lines.size));
    for (int64_t l = lo; l < hi; ++l) {
      const int64_t base = lines.start(l);
      T s = 0;
      for (int64_t k = lines.size - 1; k >= 0; --k) {
        const int64_t i = base + k * lines.inner;
        s = k + 1 < lines.size ? pg[i] + px[i + lines.inner] * s : pg[i];
        suffix[static_cast<size_t>(k)] = s;
      }
      T prefix = 1;
      for (int64_t k = 0; k < lines.size; ++k) {
        const int64_t i = base + k * lines.inner;
        po[i] = prefix * suffix[static_cast<size_t>(k)];
        prefix *= px[i];
      }
    }
  });
}

void cumprod_backward_kernel(KernelContext& ctx) {
  TESSERA_DISPATCH_FLOATING(ctx.inputs[1].dtype(), ctx.op.name, [&] {
    cumprod_backward_impl<scalar_t>(ctx.inputs[0], ctx.inputs[1], ctx.outputs[0],
                                    ctx.attrs.i("dim"));
  });
}

// (value, position) pairs ordered as PyTorch's CPU kernels order them: NaN
// above every number. sort and topk run the same standard-library
// algorithms as those kernels with these predicates, so tied values come
// out in the same positions as in PyTorch.
template <typename T>
using Entry = std::pair<T, int64_t>;

template <typename T>
bool is_nan(T v) {
  if constexpr (std::is_floating_point_v<T>) {
    return std::isnan(v);
  } else {
    return false;
  }
}

template <typename T>
bool ranks_below(const Entry<T>& a, const Entry<T>& b) {
  return (!is_nan(a.first) && is_nan(b.first)) || a.first < b.first;
}

template <typename T>
bool ranks_above(const Entry<T>& a, const Entry<T>& b) {
  return (is_nan(a.first) && !is_nan(b.first)) || a.first > b.first;
}

// Every line of `input` along dim as (value, position) pairs, arranged by
// `arrange` so that its first k are the result: values and indices get them.
template <typename T, typename Arrange>
void arrange_lines(const Tensor& input, Tensor& values, Tensor& indices, int64_t dim, int64_t k,
                   const Arrange& arrange) {
  if (values.numel() == 0) return;
  NoGradGuard no_grad;
  const Tensor& x = input;  // contiguous: the op asks the dispatcher
  const Lines lines = lines_of(x.shape(), dim);
  const Lines out_lines{lines.outer, k, lines.inner};
  const T* px = x.data<T>();
  T* pv = values.data<T>();
  int64_t* pi = indices.data<int64_t>();
  parallel_for(0, lines.count(), grain_for(lines), [&](int64_t lo, int64_t hi) {
    std::vector<Entry<T>> line(static_cast<size_t>(lines.size));
    for (int64_t l = lo; l < hi; ++l) {
      const int64_t base = lines.start(l);
      for (int64_t j = 0; j < lines.size; ++j) {
        line[static_cast<size_t>(j)] = {px[base + j * lines.inner], j};
      }
      arrange(line);
      const int64_t out_base = out_lines.start(l);
      for (int64_t j = 0; j < k; ++j) {
        const int64_t o = out_base + j * lines.inner;
        pv[o] = line[static_cast<size_t>(j)].first;
        pi[o] = line[static_cast<size_t>(j)].second;
      }
    }
  });
}

// Sorts every line: std::stable_sort when stable, else std::sort (whose
// order of ties is the one PyTorch gives).
template <typename T>
void sort_impl(const Tensor& input, Tensor& values, Tensor& indices, int64_t dim,
               bool descending, bool stable) {
  const int64_t size = input.dim() == 0 ? 1 : input.size(dim);
  arrange_lines<T>(input, values, indices, dim, size, [&](std::vector<Entry<T>>& line) {
    auto order = [&](const auto& first) {
      if (stable) {
        std::stable_sort(line.begin(), line.end(), first);
      } else {
        std::sort(line.begin(), line.end(), first);
      }
    };
    if (descending) {
      order(ranks_above<T>);
    } else {
      order(ranks_below<T>);
    }
  });
}

void sort_kernel(KernelContext& ctx) {
  const int64_t dim = ctx.attrs.i("dim");
  TESSERA_DISPATCH_NUMERIC(ctx.inputs[0].dtype(), ctx.op.name, [&] {
    sort_impl<scalar_t>(ctx.inputs[0], ctx.outputs[0], ctx.outputs[1], dim,
                        ctx.attrs.b("descending"), ctx.attrs.b("stable"));
  });
}

// topk chooses as PyTorch's CPU kernel does: a partial sort when k is small
// against the line (64 k <= n), else nth_element at k - 1 and, if sorted, a
// sort of the k - 1 in front of it.
template <typename T>
void topk_impl(const Tensor& input, Tensor& values, Tensor& indices, int64_t dim, int64_t k,
               bool largest, bool sorted) {
  arrange_lines<T>(input, values, indices, dim, k, [&](std::vector<Entry<T>>& line) {
    const auto n = static_cast<int64_t>(line.size());
    auto select = [&](const auto& first) {
      if (k * 64 <= n) {
        std::partial_sort(line.begin(), line.begin() + k, line.end(), first);
      } else {
        std::nth_element(line.begin(), line.begin() + k - 1, line.end(), first);
        if (sorted) std::sort(line.begin(), line.begin() + k - 1, first);
      }
    };
    if (largest) {
      select(ranks_above<T>);
    } else {
      select(ranks_below<T>);
    }
  });
}

void topk_kernel(KernelContext& ctx) {
  TESSERA_DISPATCH_NUMERIC(ctx.inputs[0].dtype(), ctx.op.name, [&] {
    topk_impl<scalar_t>(ctx.inputs[0], ctx.outputs[0], ctx.outputs[1], ctx.attrs.i("dim"),
                        ctx.attrs.i("k"), ctx.attrs.b("largest"), ctx.attrs.b("sorted"));
  });
}

#define NUMERIC                                                                          \
  ::tessera::DType::f32, ::tessera::DType::f64, ::tessera::DType::i64, ::tessera::DType::i32, \
      ::tessera::DType::u8

TESSERA_REGISTER_KERNEL("cumsum", cpu, scan_kernel<false>, NUMERIC);
TESSERA_REGISTER_KERNEL("cumprod", cpu, scan_kernel<true>, NUMERIC);
TESSERA_REGISTER_KERNEL("cumprod_backward", cpu, cumprod_backward_kernel, ::tessera::DType::f32,
                        ::tessera::DType::f64);
TESSERA_REGISTER_KERNEL("sort", cpu, sort_kernel, NUMERIC);
TESSERA_REGISTER_KERNEL("topk", cpu, topk_kernel, NUMERIC);

}  // namespace

}  // namespace tessera::cpu
