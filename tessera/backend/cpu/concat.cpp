// CPU kernel for cat (ops/concat.cpp): each input is copied into the window
// of the output it occupies; the strided copy merges dims, so contiguous
// inputs become one run per outer row.

#include "tessera/backend/cpu/data_movement.h"
#include "tessera/ops/op.h"

namespace tessera::cpu {

namespace {

void cat_kernel(KernelContext& ctx) {
  Tensor& out = ctx.outputs[0];
  const int64_t dim = ctx.attrs.i("dim");
  int64_t start = 0;
  for (const Tensor& input : ctx.inputs) {
    Tensor window =
        make_alias(out, input.shape(), out.strides(), out.offset() + start * out.strides()[dim]);
    copy_into(input, window);
    start += input.shape()[dim];
  }
}

TESSERA_REGISTER_KERNEL("cat", cpu, cat_kernel, ::tessera::DType::f32, ::tessera::DType::f64,
                        ::tessera::DType::bf16, ::tessera::DType::f16, ::tessera::DType::i64,
                        ::tessera::DType::i32, ::tessera::DType::u8, ::tessera::DType::boolean);

}  // namespace

}  // namespace tessera::cpu
