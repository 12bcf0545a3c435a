// CUDA kernels for copy_ and fill_ (ops/elementwise.cpp). CUDA has no
// compute kernels yet: a source that needs casting, broadcasting or laying
// out is prepared on the CPU, then one copy writes the device memory.

#include "tessera/core/device_memory.h"
#include "tessera/ops/creation.h"
#include "tessera/ops/op.h"

namespace tessera::cuda {

namespace {

void check_contiguous_destination(const Tensor& dst, const char* op) {
  TESSERA_CHECK(dst.is_contiguous(), "[", op, "] a non-contiguous destination must be on the ",
                "CPU for now, got shape ", shape_str(dst.shape()), " with strides ",
                shape_str(dst.strides()), " on ", device_str(dst.device()));
}

void write_dense(const Tensor& dst, const Tensor& dense) {
  device_memory::copy(dst.raw_data(), dst.device(), dense.raw_data(), dense.device(),
                      static_cast<size_t>(dst.numel()) * dtype_size(dst.dtype()));
}

void copy_into_kernel(KernelContext& ctx) {
  const Tensor& dst = ctx.inputs[0];
  const Tensor& src = ctx.inputs[1];
  check_contiguous_destination(dst, "copy_");
  if (src.is_same(dst) || dst.numel() == 0) return;
  if (src.dtype() == dst.dtype() && src.shape() == dst.shape() && src.is_contiguous() &&
      !src.shares_storage(dst)) {
    write_dense(dst, src);
    return;
  }
  write_dense(dst, src.cpu().to(dst.dtype()).expand(dst.shape()).contiguous());
}

void fill_kernel(KernelContext& ctx) {
  const Tensor& dst = ctx.inputs[0];
  check_contiguous_destination(dst, "fill_");
  if (dst.numel() == 0) return;
  const Scalar value =
      ctx.attrs.has("int_value") ? Scalar(ctx.attrs.i("int_value")) : Scalar(ctx.attrs.f("value"));
  write_dense(dst, full(dst.shape(), value, dst.dtype()));
}

// to_device from a CUDA device. A strided view has no kernel here: the span
// of memory it covers comes to the CPU, where it is laid out densely.
void to_device_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.inputs[0];
  Tensor& out = ctx.outputs[0];
  const size_t bytes = static_cast<size_t>(out.numel()) * dtype_size(out.dtype());
  if (x.is_contiguous()) {
    device_memory::copy(out.raw_data(), out.device(), x.raw_data(), x.device(), bytes);
    return;
  }
  int64_t span = 1;
  for (size_t d = 0; d < x.shape().size(); ++d) {
    TESSERA_CHECK(x.strides()[d] >= 0, "[to] negative strides are not supported, got ",
                  shape_str(x.strides()));
    if (x.shape()[d] == 0) span = 0;
    if (span > 0) span += (x.shape()[d] - 1) * x.strides()[d];
  }
  Tensor staging = Tensor::empty({span}, x.dtype());
  device_memory::copy(staging.raw_data(), Device{}, x.raw_data(), x.device(),
                      static_cast<size_t>(span) * dtype_size(x.dtype()));
  Tensor dense = make_alias(staging, x.shape(), x.strides(), 0).contiguous();
  device_memory::copy(out.raw_data(), out.device(), dense.raw_data(), Device{}, bytes);
}

}  // namespace

TESSERA_REGISTER_KERNEL("to_device", cuda, to_device_kernel, DType::f32, DType::f64, DType::bf16,
                        DType::f16, DType::i64, DType::i32, DType::u8, DType::boolean);
TESSERA_REGISTER_KERNEL("copy_", cuda, copy_into_kernel, DType::f32, DType::f64, DType::bf16,
                        DType::f16, DType::i64, DType::i32, DType::u8, DType::boolean);
TESSERA_REGISTER_KERNEL("fill_", cuda, fill_kernel, DType::f32, DType::f64, DType::bf16, DType::f16,
                        DType::i64, DType::i32, DType::u8, DType::boolean);

}  // namespace tessera::cuda
