// CPU kernel for searchsorted (ops/search.cpp): one binary search per value.

#include <algorithm>
#include <type_traits>

#include "tessera/backend/cpu/loops.h"
#include "tessera/core/thread_pool.h"
#include "tessera/ops/op.h"

namespace tessera::cpu {

namespace {

// Binary search as PyTorch writes it, so a NaN value lands past the end.
void searchsorted_kernel(KernelContext& ctx) {
  const Tensor& sequence = ctx.inputs[0];
  const Tensor& values = ctx.inputs[1];
  const bool right = ctx.attrs.b("right");
  const int64_t n = sequence.shape().back();
  const int64_t per_line = values.dim() == 0 ? 1 : values.shape().back();
  const bool shared = sequence.dim() == 1;
  Tensor& out = ctx.outputs[0];
  TESSERA_DISPATCH_NUMERIC(sequence.dtype(), "searchsorted", [&] {
    using T = scalar_t;
    const T* seq = storage_ptr<T>(sequence) + sequence.offset();
    const T* in = storage_ptr<T>(values) + values.offset();
    auto write = [&](auto* result) {
      using Index = std::remove_pointer_t<decltype(result)>;
      int64_t grain = std::max<int64_t>(1, kElementwiseGrain / 16);
      parallel_for(0, values.numel(), grain, [&](int64_t lo, int64_t hi) {
        for (int64_t i = lo; i < hi; ++i) {
          const T* line = shared ? seq : seq + (i / per_line) * n;
          const T value = in[i];
          int64_t start = 0, end = n;
          while (start < end) {
            int64_t mid = start + (end - start) / 2;
            bool go_right = right ? !(line[mid] > value) : !(line[mid] >= value);
            if (go_right) {
              start = mid + 1;
            } else {
              end = mid;
            }
          }
          result[i] = static_cast<Index>(start);
        }
      });
    };
    if (out.dtype() == DType::i32) {
      write(storage_ptr<int32_t>(out) + out.offset());
    } else {
      write(storage_ptr<int64_t>(out) + out.offset());
    }
  });
}

TESSERA_REGISTER_KERNEL("searchsorted", cpu, searchsorted_kernel, ::tessera::DType::f32,
                        ::tessera::DType::f64, ::tessera::DType::i64, ::tessera::DType::i32,
                        ::tessera::DType::u8);

}  // namespace

}  // namespace tessera::cpu
