// CPU kernel for dropout (ops/dropout.cpp). Element g of the logical tensor
// is kept when word g % 4 of Philox block g / 4 of stream (seed, offset) is
// below (1 - p) * 2^32; a shard maps its local elements to g through the
// logical shape and its start.

#include <cmath>

#include "tessera/backend/cpu/loops.h"
#include "tessera/core/grad_mode.h"
#include "tessera/core/rng.h"
#include "tessera/ops/op.h"

namespace tessera::cpu {

namespace {

struct Mask {
  uint64_t seed, offset, threshold;

  // Applies the mask to n elements whose global indices are first, first + 1, ...
  template <typename T>
  void apply(const T* x, T* out, int64_t n, uint64_t first, T scale) const {
    std::array<uint32_t, 4> words{};
    for (int64_t i = 0; i < n; ++i) {
      const uint64_t g = first + static_cast<uint64_t>(i);
      if (i == 0 || (g & 3) == 0) words = Philox::block(seed, offset, g >> 2);
      out[i] = words[g & 3] < threshold ? x[i] * scale : T(0);
    }
  }
};

template <typename T>
void dropout_loop(const Tensor& x_in, Tensor& out, const Attrs& attrs) {
  Tensor x;
  {
    NoGradGuard no_grad;
    x = x_in.contiguous();
  }
  const double p = attrs.f("p");
  const Mask mask{static_cast<uint64_t>(attrs.i("seed")), static_cast<uint64_t>(attrs.i("offset")),
                  static_cast<uint64_t>(std::ldexp(1.0 - p, 32))};
  const T scale = static_cast<T>(1.0 / (1.0 - p));
  const T* px = x.data<T>();
  T* po = out.data<T>();
  const Shape& local = x.shape();
  const Shape& logical = attrs.ints("logical_shape");
  const std::vector<int64_t>& start = attrs.ints("shard_start");
  const int64_t count = x.numel();
  if (local == logical) {
    // The whole tensor (or a partial-sum copy): global index = local index.
    // Chunks start at multiples of 4 so each Philox block is made once.
    parallel_for(0, (count + 3) / 4, 2048, [&](int64_t lo, int64_t hi) {
      const int64_t begin = lo * 4, end = std::min(hi * 4, count);
      mask.apply(px + begin, po + begin, end - begin, static_cast<uint64_t>(begin), scale);
    });
    return;
  }
  // A shard: rows along the last dim are contiguous in both numberings.
  const int64_t nd = static_cast<int64_t>(local.size());
  const int64_t inner = local[nd - 1];
  if (count == 0) return;
  const Strides logical_strides = contiguous_strides(logical);
  parallel_for(0, count / inner, std::max<int64_t>(1, 8192 / inner), [&](int64_t lo, int64_t hi) {
    for (int64_t row = lo; row < hi; ++row) {
      int64_t rest = row, global = start[nd - 1];
      for (int64_t d = nd - 2; d >= 0; --d) {
        global += (rest % local[d] + start[d]) * logical_strides[d];
        rest /= local[d];
      }
      mask.apply(px + row * inner, po + row * inner, inner, static_cast<uint64_t>(global), scale);
    }
  });
}

void dropout_kernel(KernelContext& ctx) {
  TESSERA_DISPATCH_FLOATING(ctx.inputs[0].dtype(), "dropout", [&] {
    dropout_loop<scalar_t>(ctx.inputs[0], ctx.outputs[0], ctx.attrs);
  });
}

TESSERA_REGISTER_KERNEL("dropout", cpu, dropout_kernel, ::tessera::DType::f32,
                        ::tessera::DType::f64);

}  // namespace

}  // namespace tessera::cpu
