// CPU kernel for slice_backward (ops/view.cpp); the other view ops alias
// their input and need no kernel.

#include <cstring>

#include "tessera/backend/cpu/loops.h"
#include "tessera/ops/op.h"

namespace tessera::cpu {

namespace {

void slice_backward_kernel(KernelContext& ctx) {
  const Tensor& grad = ctx.inputs[0];
  Tensor& out = ctx.outputs[0];
  std::memset(out.raw_data(), 0, static_cast<size_t>(out.numel()) * dtype_size(out.dtype()));
  int64_t dim = ctx.attrs.i("dim"), start = ctx.attrs.i("start"), step = ctx.attrs.i("step");
  // Scatter through a strided alias of the output covering the slice.
  Strides strides = out.strides();
  strides[dim] *= step;
  Tensor window = make_alias(out, grad.shape(), strides, out.offset() + start * out.strides()[dim]);
  auto loop = make_loop<2>(grad.shape(), {window.strides(), broadcast_strides(grad, grad.shape())},
                           {window.offset(), grad.offset()});
  TESSERA_DISPATCH_FLOATING(grad.dtype(), "slice_backward", [&] {
    scalar_t* out_base = storage_ptr<scalar_t>(out);
    const scalar_t* in_base = storage_ptr<scalar_t>(grad);
    for_each_run(loop, [&](const std::array<int64_t, 2>& offsets,
                           const std::array<int64_t, 2>& st, int64_t n) {
      for (int64_t i = 0; i < n; ++i) out_base[offsets[0] + i * st[0]] = in_base[offsets[1] + i * st[1]];
    });
  });
}

TESSERA_REGISTER_KERNEL("slice_backward", cpu, slice_backward_kernel, ::tessera::DType::f32,
                        ::tessera::DType::f64);

}  // namespace

}  // namespace tessera::cpu
