// CPU kernels for pad and pad_backward (ops/pad.cpp). Constant padding fills
// the output and copies the (possibly cropped) input into its window. The
// other modes map each output coordinate to an input coordinate per dim
// through a table; their backward folds the gradient one padded dim at a
// time, summing each input position's sources in a fixed order.

#include <algorithm>
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

void fill(Tensor& out, double value) {
  TESSERA_DISPATCH_ALL(out.dtype(), "pad", [&] {
    scalar_t fill_value = value_as<scalar_t>(value);
    scalar_t* data = out.data<scalar_t>();
    parallel_for(0, out.numel(), kElementwiseGrain, [&](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i) data[i] = fill_value;
    });
  });
}

void constant_pad(const Tensor& x, Tensor& out, const std::vector<int64_t>& before,
                  const std::vector<int64_t>& after, double value) {
  bool grows = false;
  Shape kept = x.shape();
  int64_t x_offset = x.offset(), out_offset = out.offset();
  for (int64_t d = 0; d < x.dim(); ++d) {
    grows = grows || before[d] > 0 || after[d] > 0;
    int64_t crop_before = std::max<int64_t>(-before[d], 0);
    kept[d] -= crop_before + std::max<int64_t>(-after[d], 0);
    x_offset += crop_before * x.strides()[d];
    out_offset += std::max<int64_t>(before[d], 0) * out.strides()[d];
  }
  if (grows) fill(out, value);
  copy_into(make_alias(x, kept, x.strides(), x_offset),
            make_alias(out, kept, out.strides(), out_offset));
}

void table_pad(const Tensor& x, Tensor& out, const std::vector<int64_t>& before, PadMode mode) {
  const int64_t ndim = out.dim();
  const Shape& shape = out.shape();
  // tables[d][o]: element offset in x of output coordinate o along dim d.
  std::vector<std::vector<int64_t>> tables(ndim);
  for (int64_t d = 0; d < ndim; ++d) {
    for (int64_t o = 0; o < shape[d]; ++o) {
      tables[d].push_back(source_index(o, before[d], x.shape()[d], mode) * x.strides()[d]);
    }
  }
  const int64_t inner = shape[ndim - 1];
  const int64_t rows = out.numel() / std::max<int64_t>(inner, 1);
  if (out.numel() == 0) return;
  dispatch_by_size(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    T* out_base = storage_ptr<T>(out);
    const T* x_base = storage_ptr<T>(x);
    const std::vector<int64_t>& last = tables[ndim - 1];
    int64_t grain = std::max<int64_t>(1, kElementwiseGrain / inner);
    parallel_for(0, rows, grain, [&](int64_t lo, int64_t hi) {
      for (int64_t row = lo; row < hi; ++row) {
        int64_t offset = x.offset(), remaining = row;
        for (int64_t d = ndim - 2; d >= 0; --d) {
          offset += tables[d][remaining % shape[d]];
          remaining /= shape[d];
        }
        T* __restrict po = out_base + out.offset() + row * inner;
        const T* __restrict px = x_base + offset;
        for (int64_t k = 0; k < inner; ++k) po[k] = px[last[k]];
      }
    });
  });
}

void pad_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.inputs[0];
  Tensor& out = ctx.outputs[0];
  const auto& before = ctx.attrs.ints("before");
  const auto& after = ctx.attrs.ints("after");
  PadMode mode = parse_mode(ctx.attrs.get<std::string>("mode"));
  if (mode == PadMode::constant) {
    constant_pad(x, out, before, after, ctx.attrs.f("value"));
  } else if (x.dim() == 0) {
    copy_into(x, out);
  } else {
    table_pad(x, out, before, mode);
  }
}

// dst[outer, i, inner] = sum over o with source(o) == i of src[outer, o, inner],
// both contiguous; sources are summed in increasing o.
template <typename T>
void fold_dim(const T* src, T* dst, int64_t outer, int64_t src_length, int64_t dst_length,
              int64_t inner, int64_t before, PadMode mode) {
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
      fold_dim(current.data<scalar_t>(), next.data<scalar_t>(), outer, current.shape()[d],
               shape[d], inner, before[d], mode);
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
