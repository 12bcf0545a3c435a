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

}  // namespace

TESSERA_REGISTER_KERNEL("copy_", cuda, copy_into_kernel, DType::f32, DType::f64, DType::bf16,
                        DType::f16, DType::i64, DType::i32, DType::u8, DType::boolean);
TESSERA_REGISTER_KERNEL("fill_", cuda, fill_kernel, DType::f32, DType::f64, DType::bf16, DType::f16,
                        DType::i64, DType::i32, DType::u8, DType::boolean);

}  // namespace tessera::cuda
