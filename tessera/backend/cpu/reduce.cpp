// CPU kernels for reductions (ops/reduce.cpp). The input is viewed as
// [kept, reduced]: reduced elements contiguous -> row reductions; reduced
// dims leading and kept dims contiguous -> column accumulation; anything
// else is copied into row layout first.

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <optional>

#include "tessera/backend/cpu/loops.h"
#include "tessera/backend/cpu/row_math.h"
#include "tessera/backend/cpu/vec_math.h"
#include "tessera/ops/op.h"
#include "tessera/ops/view.h"

namespace tessera::cpu {

namespace {

// Accumulator type: sums of floats use double across blocks, ints use i64.
template <typename T> struct SumTraits { using acc = int64_t; };
template <> struct SumTraits<float> { using acc = double; };
template <> struct SumTraits<double> { using acc = double; };

constexpr int kLanes = 16;

// Independent accumulator lanes let GCC vectorise the loop (a single FP
// accumulator is a serial dependency it may not reorder); floats accumulate
// in double, which costs nothing on memory-bound rows and avoids drift.
template <typename T>
typename SumTraits<T>::acc row_sum(const T* p, int64_t n) {
  using Acc = typename SumTraits<T>::acc;
  Acc lanes[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (int l = 0; l < kLanes; ++l) lanes[l] = wrapping_add(lanes[l], static_cast<Acc>(p[i + l]));
  }
  Acc total = 0;
  for (int l = 0; l < kLanes; ++l) total = wrapping_add(total, lanes[l]);
  for (; i < n; ++i) total = wrapping_add(total, static_cast<Acc>(p[i]));
  return total;
}

// Max (min) of a row on GCC vector types; any NaN makes the result NaN, as
// in PyTorch.
template <typename T, bool IsMax>
T row_extremum(const T* p, int64_t n) {
  constexpr int64_t w = rows::kWidth<T>;
  const T init = IsMax ? (std::numeric_limits<T>::has_infinity ? -std::numeric_limits<T>::infinity()
                                                                : std::numeric_limits<T>::lowest())
                       : (std::numeric_limits<T>::has_infinity ? std::numeric_limits<T>::infinity()
                                                                : std::numeric_limits<T>::max());
  rows::Pack<T> best = rows::splat(init);
  rows::Pack<T> zero = rows::splat(T(0));
  auto nan_seen = zero != zero;
  int64_t i = 0;
  for (; i + w <= n; i += w) {
    const rows::Pack<T> v = rows::load(p + i);
    best = (IsMax ? v > best : v < best) ? v : best;
    nan_seen |= v != v;
  }
  T result = init;
  for (int64_t l = 0; l < w; ++l) {
    if (nan_seen[l]) return std::numeric_limits<T>::quiet_NaN();
    result = (IsMax ? best[l] > result : best[l] < result) ? best[l] : result;
  }
  for (; i < n; ++i) {
    T v = p[i];
    if (v != v) return v;
    result = (IsMax ? v > result : v < result) ? v : result;
  }
  return result;
}

// First index of the max (min); a NaN counts as the extremum, as in PyTorch.
template <typename T, bool IsMax>
int64_t row_arg_extremum(const T* p, int64_t n, int64_t stride) {
  int64_t best = 0;
  T best_value = p[0];
  if (best_value != best_value) return 0;
  for (int64_t i = 1; i < n; ++i) {
    T v = p[i * stride];
    if (v != v) return i;
    if (IsMax ? v > best_value : v < best_value) {
      best_value = v;
      best = i;
    }
  }
  return best;
}

// The input as [outer, inner] rows with inner contiguous, copying if needed.
struct Rows {
  Tensor data;
  int64_t outer = 1;
  int64_t inner = 1;
};

Tensor permuted_alias(const Tensor& x, const std::vector<int64_t>& dims, Shape& kept_shape,
                      int64_t& inner) {
  std::vector<int64_t> order;
  kept_shape.clear();
  inner = 1;
  for (int64_t d = 0; d < x.dim(); ++d) {
    if (std::find(dims.begin(), dims.end(), d) == dims.end()) {
      order.push_back(d);
      kept_shape.push_back(x.shape()[d]);
    }
  }
  for (int64_t d : dims) {
    order.push_back(d);
    inner *= x.shape()[d];
  }
  Shape shape;
  Strides strides;
  for (int64_t d : order) {
    shape.push_back(x.shape()[d]);
    strides.push_back(x.strides()[d]);
  }
  return make_alias(x, shape, strides, x.offset());
}

// Copies any strided `source` into the contiguous `target` as raw words.
template <typename Word>
void copy_strided(const Tensor& source, Tensor& target) {
  auto loop = loop_over<2>(target, {source});
  Word* out_base = storage_ptr<Word>(target);
  const Word* in_base = storage_ptr<Word>(source);
  for_each_run(loop, [&](const std::array<int64_t, 2>& offsets, const std::array<int64_t, 2>& st,
                         int64_t n) {
    for (int64_t i = 0; i < n; ++i) out_base[offsets[0] + i] = in_base[offsets[1] + i * st[1]];
  });
}

Rows as_rows(const Tensor& x, const std::vector<int64_t>& dims) {
  Shape kept_shape;
  Rows rows;
  Tensor permuted = permuted_alias(x, dims, kept_shape, rows.inner);
  rows.outer = numel(kept_shape);
  Shape target{rows.outer, rows.inner};
  auto strides = view_strides(permuted.shape(), permuted.strides(), target);
  if (strides && ((*strides)[1] == 1 || rows.inner == 1)) {
    rows.data = make_alias(permuted, target, *strides, permuted.offset());
    return rows;
  }
  // Copy into row layout with the shared strided copy loop.
  Tensor dense = Tensor::empty(permuted.shape(), x.dtype());
  switch (dtype_size(x.dtype())) {
    case 1: copy_strided<uint8_t>(permuted, dense); break;
    case 2: copy_strided<uint16_t>(permuted, dense); break;
    case 4: copy_strided<uint32_t>(permuted, dense); break;
    default: copy_strided<uint64_t>(permuted, dense); break;
  }
  rows.data = make_alias(dense, target, contiguous_strides(target), 0);
  return rows;
}

// Reduced dims leading and kept dims one contiguous block: x is [inner, outer].
bool as_columns(const Tensor& x, const std::vector<int64_t>& dims, int64_t& reduced, int64_t& kept,
                int64_t& row_stride) {
  int64_t count = static_cast<int64_t>(dims.size());
  for (int64_t i = 0; i < count; ++i) {
    if (dims[i] != i) return false;
  }
  reduced = 1;
  for (int64_t d = 0; d < count; ++d) reduced *= x.shape()[d];
  kept = x.numel() / std::max<int64_t>(reduced, 1);
  auto strides = view_strides(x.shape(), x.strides(), {reduced, kept});
  if (!strides || (*strides)[1] != 1) return false;
  row_stride = (*strides)[0];
  return reduced > 1 && kept > 1;
}

// When the reduced dims end with a trailing block (e.g. {0, 2, 3} of NCHW)
// and others remain, the trailing block is reduced first as contiguous rows
// and the rest afterwards, instead of copying x into row layout. Returns the
// dims still to reduce over the (smaller) intermediate, or nullopt.
std::optional<std::vector<int64_t>> split_trailing(const Tensor& x, const std::vector<int64_t>& dims,
                                                   Shape& intermediate_shape) {
  int64_t ndim = x.dim();
  size_t trailing = 0;
  while (trailing < dims.size() && dims[dims.size() - 1 - trailing] == ndim - 1 - static_cast<int64_t>(trailing)) {
    ++trailing;
  }
  if (trailing == 0 || trailing == dims.size() || !x.is_contiguous()) return std::nullopt;
  intermediate_shape.assign(x.shape().begin(), x.shape().end() - static_cast<int64_t>(trailing));
  return std::vector<int64_t>(dims.begin(), dims.end() - static_cast<int64_t>(trailing));
}

template <typename T>
void sum_impl(const Tensor& x, const std::vector<int64_t>& dims, Tensor& out) {
  using Out = std::conditional_t<std::is_floating_point_v<T>, T, int64_t>;
  using Acc = typename SumTraits<T>::acc;
  Out* po = out.data<Out>();
  int64_t reduced, kept, row_stride;
  if (as_columns(x, dims, reduced, kept, row_stride)) {
    const T* px = x.data<T>();
    parallel_for(0, kept, 256, [&](int64_t lo, int64_t hi) {
      std::vector<Acc> acc(hi - lo, Acc(0));
      for (int64_t r = 0; r < reduced; ++r) {
        const T* row = px + r * row_stride;
        for (int64_t k = lo; k < hi; ++k)
          acc[k - lo] = wrapping_add(acc[k - lo], static_cast<Acc>(row[k]));
      }
      for (int64_t k = lo; k < hi; ++k) po[k] = static_cast<Out>(acc[k - lo]);
    });
    return;
  }
  Shape intermediate_shape;
  if (auto rest = split_trailing(x, dims, intermediate_shape)) {
    Tensor intermediate = Tensor::empty(intermediate_shape, out.dtype());
    std::vector<int64_t> trailing(dims.begin() + rest->size(), dims.end());
    sum_impl<T>(x, trailing, intermediate);
    sum_impl<Out>(intermediate, *rest, out);
    return;
  }
  Rows rows = as_rows(x, dims);
  const T* px = rows.data.data<T>();
  int64_t row_stride_elems = rows.data.strides()[0];
  parallel_for(0, rows.outer, std::max<int64_t>(1, kElementwiseGrain / std::max<int64_t>(rows.inner, 1)),
               [&](int64_t lo, int64_t hi) {
                 for (int64_t o = lo; o < hi; ++o) {
                   po[o] = static_cast<Out>(row_sum(px + o * row_stride_elems, rows.inner));
                 }
               });
}

template <typename T, bool IsMax>
void extremum_impl(const Tensor& x, const std::vector<int64_t>& dims, Tensor& out) {
  Shape intermediate_shape;
  if (auto rest = split_trailing(x, dims, intermediate_shape)) {
    Tensor intermediate = Tensor::empty(intermediate_shape, out.dtype());
    std::vector<int64_t> trailing(dims.begin() + rest->size(), dims.end());
    extremum_impl<T, IsMax>(x, trailing, intermediate);
    extremum_impl<T, IsMax>(intermediate, *rest, out);
    return;
  }
  Rows rows = as_rows(x, dims);
  const T* px = rows.data.data<T>();
  T* po = out.data<T>();
  int64_t row_stride = rows.data.strides()[0];
  parallel_for(0, rows.outer, std::max<int64_t>(1, kElementwiseGrain / std::max<int64_t>(rows.inner, 1)),
               [&](int64_t lo, int64_t hi) {
                 for (int64_t o = lo; o < hi; ++o) {
                   po[o] = row_extremum<T, IsMax>(px + o * row_stride, rows.inner);
                 }
               });
}

template <typename T, bool IsMax>
void arg_impl(const Tensor& x, const std::vector<int64_t>& dims, Tensor& out) {
  Rows rows = as_rows(x, dims);
  const T* px = rows.data.data<T>();
  int64_t* po = out.data<int64_t>();
  int64_t row_stride = rows.data.strides()[0];
  int64_t inner_stride = rows.data.strides()[1];
  parallel_for(0, rows.outer, std::max<int64_t>(1, kElementwiseGrain / std::max<int64_t>(rows.inner, 1)),
               [&](int64_t lo, int64_t hi) {
                 for (int64_t o = lo; o < hi; ++o) {
                   po[o] = row_arg_extremum<T, IsMax>(px + o * row_stride, rows.inner, inner_stride);
                 }
               });
}

void sum_kernel(KernelContext& ctx) {
  const auto& dims = ctx.attrs.ints("dims");
  const Tensor& x = ctx.inputs[0];
  if (x.dtype() == DType::boolean) {
    Tensor as_u8 = make_alias(x, x.shape(), x.strides(), x.offset());
    as_u8.impl().dtype = DType::u8;  // bool is stored as 0/1 bytes
    sum_impl<uint8_t>(as_u8, dims, ctx.outputs[0]);
    return;
  }
  TESSERA_DISPATCH_NUMERIC(x.dtype(), "sum", [&] { sum_impl<scalar_t>(x, dims, ctx.outputs[0]); });
}

template <bool IsMax>
void extremum_kernel(KernelContext& ctx) {
  TESSERA_DISPATCH_NUMERIC(ctx.inputs[0].dtype(), ctx.op.name, [&] {
    extremum_impl<scalar_t, IsMax>(ctx.inputs[0], ctx.attrs.ints("dims"), ctx.outputs[0]);
  });
}

template <bool IsMax>
void arg_kernel(KernelContext& ctx) {
  TESSERA_DISPATCH_NUMERIC(ctx.inputs[0].dtype(), ctx.op.name, [&] {
    arg_impl<scalar_t, IsMax>(ctx.inputs[0], ctx.attrs.ints("dims"), ctx.outputs[0]);
  });
}

#define NUMERIC                                                                          \
  ::tessera::DType::f32, ::tessera::DType::f64, ::tessera::DType::i64, ::tessera::DType::i32, \
      ::tessera::DType::u8

TESSERA_REGISTER_KERNEL("sum", cpu, sum_kernel, NUMERIC, ::tessera::DType::boolean);
TESSERA_REGISTER_KERNEL("max", cpu, extremum_kernel<true>, NUMERIC);
TESSERA_REGISTER_KERNEL("min", cpu, extremum_kernel<false>, NUMERIC);
TESSERA_REGISTER_KERNEL("argmax", cpu, arg_kernel<true>, NUMERIC);
TESSERA_REGISTER_KERNEL("argmin", cpu, arg_kernel<false>, NUMERIC);

}  // namespace

}  // namespace tessera::cpu
