// CPU kernels for pad and pad_backward (ops/pad.cpp). The forward maps each
// output coordinate to an input coordinate (or the fill value) per dim
// through a table and writes each output row once. The backward of the
// non-constant modes folds the gradient one padded dim at a time, summing
// each input position's sources in a fixed order.

#include <algorithm>
#include <cstring>
#include <string>

#include "tessera/backend/cpu/data_movement.h"
#include "tessera/ops/op.h"

namespace tessera::cpu {

namespace {

enum class PadMode { constant, reflect, replicate, circular };

PadMode parse_mode(const std::string& mode) {
  if (mode == "reflect") return PadMode::reflect;
  if (mode == "replicate") return PadMode::replicate;
  if (mode == "circular") return PadMode::circular;
  TESSERA_CHECK(mode == "constant", "[pad] unknown mode \"", mode, "\"");
  return PadMode::constant;
}

// The input coordinate that output coordinate `o` reads along one dim.
int64_t source_index(int64_t o, int64_t before, int64_t size, PadMode mode) {
  int64_t i = o - before;
  switch (mode) {
    case PadMode::reflect:
      if (i < 0) i = -i;
      if (i >= size) i = 2 * (size - 1) - i;
      return i;
    case PadMode::replicate:
      return std::clamp<int64_t>(i, 0, size - 1);
    case PadMode::circular:
      return ((i % size) + size) % size;
    case PadMode::constant:
      break;
  }
  return i;
}

// The bits of `value` as an element of dtype, in the same-width type T.
template <typename T>
T fill_bits(DType dtype, double value) {
  T bits{};
  TESSERA_DISPATCH_ALL(dtype, "pad", [&] {
    if constexpr (sizeof(scalar_t) == sizeof(T)) {
      scalar_t converted = value_as<scalar_t>(value);
      std::memcpy(&bits, &converted, sizeof(T));
    }
  });
  return bits;
}

// One pass over the output rows (all dims but the last). Per dim, a table
// gives the input element offset of each output coordinate, or -1 where a
// constant pad fills. Along the last dim a constant pad is fill, copy, fill.
void pad_rows(const Tensor& x, Tensor& out, const std::vector<int64_t>& before, PadMode mode,
              double value) {
  const int64_t ndim = out.dim();
  const Shape& shape = out.shape();
  if (out.numel() == 0) return;
  std::vector<std::vector<int64_t>> tables(ndim);
  for (int64_t d = 0; d < ndim; ++d) {
    for (int64_t o = 0; o < shape[d]; ++o) {
      int64_t i = source_index(o, before[d], x.shape()[d], mode);
      tables[d].push_back(i < 0 || i >= x.shape()[d] ? -1 : i * x.strides()[d]);
    }
  }
  const int64_t inner = shape[ndim - 1];
  const int64_t rows = out.numel() / inner;
  const int64_t last_stride = x.strides()[ndim - 1];
  // The copied span of a constant pad's rows: [lead, lead + kept) reads
  // input columns from `skip` on.
  const int64_t lead = std::max<int64_t>(before[ndim - 1], 0);
  const int64_t skip = std::max<int64_t>(-before[ndim - 1], 0);
  const int64_t kept = std::clamp<int64_t>(x.shape()[ndim - 1] - skip, 0, inner - lead);
  dispatch_by_size(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T fill = fill_bits<T>(x.dtype(), value);
    T* out_base = storage_ptr<T>(out) + out.offset();
    const T* x_base = storage_ptr<T>(x);
    const std::vector<int64_t>& last = tables[ndim - 1];
    parallel_for(0, rows, std::max<int64_t>(1, kElementwiseGrain / inner),
                 [&](int64_t lo, int64_t hi) {
                   for (int64_t row = lo; row < hi; ++row) {
                     T* __restrict po = out_base + row * inner;
                     int64_t offset = x.offset(), remaining = row;
                     bool inside = true;
                     for (int64_t d = ndim - 2; d >= 0 && inside; --d) {
                       int64_t entry = tables[d][remaining % shape[d]];
                       inside = entry >= 0;
                       offset += entry;
                       remaining /= shape[d];
                     }
                     if (!inside) {
                       std::fill(po, po + inner, fill);
                       continue;
                     }
                     const T* __restrict px = x_base + offset;
                     if (mode != PadMode::constant) {
                       for (int64_t k = 0; k < inner; ++k) po[k] = px[last[k]];
                       continue;
                     }
                     std::fill(po, po + lead, fill);
                     if (last_stride == 1) {
                       std::memcpy(po + lead, px + skip, static_cast<size_t>(kept) * sizeof(T));
                     } else {
                       for (int64_t k = 0; k < kept; ++k)
                         po[lead + k] = px[(skip + k) * last_stride];
                     }
                     std::fill(po + lead + kept, po + inner, fill);
                   }
                 });
  });
}

void pad_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.inputs[0];
  Tensor& out = ctx.outputs[0];
  if (x.dim() == 0) {
    copy_into(x, out);
    return;
  }
  pad_rows(x, out, ctx.attrs.ints("before"), parse_mode(ctx.attrs.get<std::string>("mode")),
           ctx.attrs.f("value"));
}

// dst[outer, i, inner] = sum over o with source(o) == i of src[outer, o, inner],
// both contiguous; sources are summed in increasing o.
template <typename T>
void fold_dim(const T* src, T* dst, int64_t outer, int64_t src_length, int64_t dst_length,
              int64_t inner, int64_t before, PadMode mode) {
  if (inner == 1) {
    // The innermost dim: add each source row into its target row in order.
    std::vector<int64_t> target(src_length);
    for (int64_t o = 0; o < src_length; ++o) target[o] = source_index(o, before, dst_length, mode);
    parallel_for(0, outer, std::max<int64_t>(1, kElementwiseGrain / src_length),
                 [&](int64_t lo, int64_t hi) {
                   for (int64_t block = lo; block < hi; ++block) {
                     T* __restrict out = dst + block * dst_length;
                     const T* __restrict in = src + block * src_length;
                     std::fill(out, out + dst_length, T(0));
                     for (int64_t o = 0; o < src_length; ++o) out[target[o]] += in[o];
                   }
                 });
    return;
  }
  std::vector<std::vector<int64_t>> sources(dst_length);
  for (int64_t o = 0; o < src_length; ++o) {
    sources[source_index(o, before, dst_length, mode)].push_back(o);
  }
  int64_t grain = std::max<int64_t>(1, kElementwiseGrain / std::max<int64_t>(inner, 1));
  parallel_for(0, outer * dst_length, grain, [&](int64_t lo, int64_t hi) {
    for (int64_t row = lo; row < hi; ++row) {
      int64_t block = row / dst_length, i = row % dst_length;
      T* __restrict out = dst + row * inner;
      const T* base = src + block * src_length * inner;
      std::fill(out, out + inner, T(0));
      for (int64_t o : sources[i]) {
        const T* __restrict p = base + o * inner;
        for (int64_t k = 0; k < inner; ++k) out[k] += p[k];
      }
    }
  });
}

void pad_backward_kernel(KernelContext& ctx) {
  const Tensor& grad = ctx.inputs[0];
  Tensor& out = ctx.outputs[0];
  const auto& before = ctx.attrs.ints("before");
  const auto& after = ctx.attrs.ints("after");
  PadMode mode = parse_mode(ctx.attrs.get<std::string>("mode"));
  std::vector<int64_t> padded;
  for (int64_t d = 0; d < grad.dim(); ++d) {
    if (before[d] != 0 || after[d] != 0) padded.push_back(d);
  }
  if (padded.empty() || out.numel() == 0) {
    copy_into(grad, out);
    return;
  }
  Tensor current = grad;
  if (!grad.is_contiguous() || grad.offset() != 0) {
    current = Tensor::empty(grad.shape(), grad.dtype());
    copy_into(grad, current);
  }
  TESSERA_DISPATCH_FLOATING(grad.dtype(), "pad_backward", [&] {
    for (size_t n = 0; n < padded.size(); ++n) {
      int64_t d = padded[n];
      Shape shape = current.shape();
      shape[d] = out.shape()[d];
      Tensor next = n + 1 == padded.size() ? out : Tensor::empty(shape, grad.dtype());
      int64_t outer = 1, inner = 1;
      for (int64_t k = 0; k < d; ++k) outer *= shape[k];
      for (int64_t k = d + 1; k < static_cast<int64_t>(shape.size()); ++k) inner *= shape[k];
      fold_dim(current.data<scalar_t>(), next.data<scalar_t>(), outer, current.shape()[d], shape[d],
               inner, before[d], mode);
      current = next;
    }
  });
}

TESSERA_REGISTER_KERNEL("pad", cpu, pad_kernel, ::tessera::DType::f32, ::tessera::DType::f64,
                        ::tessera::DType::bf16, ::tessera::DType::f16, ::tessera::DType::i64,
                        ::tessera::DType::i32, ::tessera::DType::u8, ::tessera::DType::boolean);
TESSERA_REGISTER_KERNEL("pad_backward", cpu, pad_backward_kernel, ::tessera::DType::f32,
                        ::tessera::DType::f64);

}  // namespace

}  // namespace tessera::cpu
