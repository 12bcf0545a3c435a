// CPU kernels for the in-place writes copy_ and fill_ (ops/elementwise.cpp):
// strided destinations, broadcast sources, one pass, no temporaries unless
// the source needs a cast or overlaps the destination.

#include <cstring>

#include "tessera/backend/cpu/loops.h"
#include "tessera/core/device_memory.h"
#include "tessera/core/memory_span.h"
#include "tessera/ops/creation.h"
#include "tessera/ops/elementwise.h"
#include "tessera/ops/op.h"

namespace tessera::cpu {

namespace {

// As PyTorch: a destination whose elements share memory (an expanded view)
// cannot be written.
void check_no_internal_overlap(const Tensor& dst) {
  for (int64_t d = 0; d < dst.dim(); ++d) {
    TESSERA_CHECK(dst.shape()[d] <= 1 || dst.strides()[d] != 0,
                  "[copy_] more than one element of the destination (shape ",
                  shape_str(dst.shape()), ", strides ", shape_str(dst.strides()),
                  ") refers to a single memory location; clone() it before writing in place");
  }
}

// Writes `source` (dst's dtype, broadcast to dst's shape) into the strided
// dst, moving whole words of the dtype's size.
template <typename Word>
void write_words(const Tensor& dst, const Tensor& source) {
  const StridedLoop<2> loop = loop_over<2>(dst, {source});
  Word* to = storage_ptr<Word>(dst);
  const Word* from = storage_ptr<const Word>(source);
  for_each_run(
      loop, [&](const std::array<int64_t, 2>& at, const std::array<int64_t, 2>& step, int64_t n) {
        Word* out = to + at[0];
        const Word* in = from + at[1];
        if (step[0] == 1 && step[1] == 1) {
          std::memcpy(out, in, static_cast<size_t>(n) * sizeof(Word));
        } else if (step[1] == 0) {
          for (int64_t i = 0; i < n; ++i) out[i * step[0]] = *in;
        } else {
          for (int64_t i = 0; i < n; ++i) out[i * step[0]] = in[i * step[1]];
        }
      });
}

void write_words(const Tensor& dst, const Tensor& source) {
  switch (dtype_size(dst.dtype())) {
    case 1:
      return write_words<uint8_t>(dst, source);
    case 2:
      return write_words<uint16_t>(dst, source);
    case 4:
      return write_words<uint32_t>(dst, source);
    case 8:
      return write_words<uint64_t>(dst, source);
    default:
      TESSERA_FAIL("[copy_] no copy for dtype ", dtype_name(dst.dtype()));
  }
}

// dst.copy_(src): inputs {dst, src}; dst is written (it is the output).
void copy_into_kernel(KernelContext& ctx) {
  const Tensor& dst = ctx.inputs[0];
  if (dst.numel() == 0) return;
  check_no_internal_overlap(dst);
  Tensor source = ctx.inputs[1];
  if (spans_meet(source, dst)) {
    // As PyTorch: the exact alias (same elements, same order) is a no-op;
    // any other overlap would read what the write already overwrote.
    if (same_elements(source, dst)) return;
    // Strided views may interleave without meeting (x[::2] and x[1::2]);
    // PyTorch cannot tell cheaply and lets them be: the source is read first.
    if (!source.is_contiguous() || !dst.is_contiguous()) {
      write_words(dst, source.to(dst.dtype()).clone());
      return;
    }
    TESSERA_FAIL("[copy_] the source and the destination overlap in memory (source: shape ",
                 shape_str(source.shape()), ", strides ", shape_str(source.strides()), ", offset ",
                 source.offset(), "; destination: shape ", shape_str(dst.shape()), ", strides ",
                 shape_str(dst.strides()), ", offset ", dst.offset(),
                 "); clone() the source first");
  }
  if (source.dtype() != dst.dtype()) source = source.to(dst.dtype());
  write_words(dst, source);
}

void fill_kernel(KernelContext& ctx) {
  const Tensor& dst = ctx.inputs[0];
  if (dst.numel() == 0) return;
  check_no_internal_overlap(dst);
  // The value as a one-element tensor of dst's dtype, broadcast over dst.
  const Tensor value = ctx.attrs.has("int_value")
                           ? full({}, Scalar(ctx.attrs.i("int_value")), dst.dtype())
                           : full({}, Scalar(ctx.attrs.f("value")), dst.dtype());
  write_words(dst, value);
}

// to_device from the CPU: the target device has no strided copy, so a
// strided view is laid out densely here first, then one transfer.
void to_device_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.inputs[0];
  Tensor& out = ctx.outputs[0];
  const Tensor dense = x.is_contiguous() ? x : x.contiguous();
  device_memory::copy(out.raw_data(), out.device(), dense.raw_data(), dense.device(),
                      static_cast<size_t>(out.numel()) * dtype_size(out.dtype()));
}

}  // namespace

TESSERA_REGISTER_KERNEL("to_device", cpu, to_device_kernel, DType::f32, DType::f64, DType::bf16,
                        DType::f16, DType::i64, DType::i32, DType::u8, DType::boolean);
TESSERA_REGISTER_KERNEL("copy_", cpu, copy_into_kernel, DType::f32, DType::f64, DType::bf16,
                        DType::f16, DType::i64, DType::i32, DType::u8, DType::boolean);
TESSERA_REGISTER_KERNEL("fill_", cpu, fill_kernel, DType::f32, DType::f64, DType::bf16, DType::f16,
                        DType::i64, DType::i32, DType::u8, DType::boolean);

}  // namespace tessera::cpu
