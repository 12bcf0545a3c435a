#pragma once

#include <chrono>
#include <cstdint>
#include <vector>

#include "tessera/core/dtype.h"
#include "tessera/distributed/group.h"

namespace gloo {
class Context;
}

namespace tessera::distributed {

// out[i] = a[i] op b[i] for n values of T (out may alias a or b).
template <typename T>
void reduce_values(ReduceOp op, void* out, const void* a, const void* b, size_t n) {
  T* c = static_cast<T*>(out);
  const T* x = static_cast<const T*>(a);
  const T* y = static_cast<const T*>(b);
  switch (op) {
    case ReduceOp::sum:
      for (size_t i = 0; i < n; ++i) c[i] = x[i] + y[i];
      break;
    case ReduceOp::max:
      for (size_t i = 0; i < n; ++i) c[i] = x[i] < y[i] ? y[i] : x[i];
      break;
    case ReduceOp::min:
      for (size_t i = 0; i < n; ++i) c[i] = y[i] < x[i] ? y[i] : x[i];
      break;
  }
}

// Reduce-scatter around a ring: in n - 1 steps each rank passes one partly
// reduced chunk to the next rank, in segments so that reducing one segment
// overlaps sending the next. Every rank sends (n - 1) / n of its input once,
// half of what an all_reduce of the concatenation sends. inputs[j] (count
// values of `dtype` each) is this rank's part of rank j's result; the
// reduced chunk of this rank lands in `output`. Slots slot_base + i,
// i < 2^24, must be free. `scratch` is reused between calls. Throws what
// Gloo throws, or tessera::Error when a step does not finish in `timeout`.
void ring_reduce_scatter(gloo::Context& context, const std::vector<const void*>& inputs,
                         void* output, size_t count, DType dtype, ReduceOp op, uint64_t slot_base,
                         std::chrono::milliseconds timeout, std::vector<uint8_t>& scratch);

}  // namespace tessera::distributed
