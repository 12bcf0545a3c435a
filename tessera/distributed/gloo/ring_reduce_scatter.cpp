#include "tessera/distributed/gloo/ring_reduce_scatter.h"

#include <gloo/context.h>
#include <gloo/transport/unbound_buffer.h>

#include <algorithm>
#include <cstring>
#include <memory>

#include "tessera/core/error.h"

namespace tessera::distributed {
namespace {

// Large enough that per-message costs vanish, small enough that a chunk
// splits into several segments whose transfer and reduction overlap.
constexpr size_t kSegmentBytes = size_t{512} << 10;

using Buffer = std::unique_ptr<gloo::transport::UnboundBuffer>;

template <typename T>
void ring(gloo::Context& context, const std::vector<const void*>& inputs, T* output, size_t count,
          ReduceOp op, uint64_t slot_base, std::chrono::milliseconds timeout,
          std::vector<uint8_t>& scratch) {
  const int n = context.size;
  const int rank = context.rank;
  const int next = (rank + 1) % n;
  const int prev = (rank + n - 1) % n;
  const int steps = n - 1;
  const size_t segment = std::max<size_t>(1, kSegmentBytes / sizeof(T));
  const size_t segments = (count + segment - 1) / segment;
  TESSERA_CHECK(static_cast<uint64_t>(steps) * segments < (uint64_t{1} << 24),
                "reduce_scatter: ", segments, " segments over ", steps, " steps exceed the slots");
  // Up to two receive areas and two accumulators, alternating by step: with
  // 2 ranks only one receive area, with 3 one accumulator.
  const size_t receive_areas = std::min(steps, 2);
  const size_t reduce_areas = std::min(steps - 1, 2);
  scratch.resize((receive_areas + reduce_areas) * count * sizeof(T));
  T* base = reinterpret_cast<T*>(scratch.data());
  T* received[2] = {base, base + (receive_areas - 1) * count};
  T* reduced[2] = {base + receive_areas * count,
                   base + (receive_areas + std::max<size_t>(reduce_areas, 1) - 1) * count};
  // At step s this rank sends chunk (rank - s - 1) and receives chunk (rank - s - 2).
  auto chunk_sent = [&](int s) { return (rank - s - 1 + 2 * n) % n; };
  auto chunk_received = [&](int s) { return (rank - s - 2 + 2 * n) % n; };
  auto slot = [&](int s, size_t k) { return slot_base + static_cast<uint64_t>(s) * segments + k; };
  auto length = [&](size_t k) { return std::min(segment, count - k * segment); };

  std::vector<std::vector<Buffer>> sends(steps), receives(steps);
  std::vector<std::vector<bool>> send_waited(steps, std::vector<bool>(segments, false));
  auto post_receives = [&](int s) {
    for (size_t k = 0; k < segments; ++k) {
      receives[s].push_back(
          context.createUnboundBuffer(received[s % 2] + k * segment, length(k) * sizeof(T)));
      receives[s].back()->recv(prev, slot(s, k));
    }
  };
  auto post_send = [&](int s, const T* source, size_t k) {
    // Gloo only reads a buffer it sends.
    sends[s].push_back(
        context.createUnboundBuffer(const_cast<T*>(source) + k * segment, length(k) * sizeof(T)));
    sends[s].back()->send(next, slot(s, k));
  };
  auto wait_send = [&](int s, size_t k) {
    if (send_waited[s][k]) return;
    TESSERA_CHECK(sends[s][k]->waitSend(timeout), "timed out sending to rank ", next);
    send_waited[s][k] = true;
  };

  post_receives(0);
  for (size_t k = 0; k < segments; ++k) {
    post_send(0, static_cast<const T*>(inputs[chunk_sent(0)]), k);
  }
  for (int s = 0; s < steps; ++s) {
    if (s + 1 < steps) post_receives(s + 1);
    const bool last = s + 1 == steps;
    T* target = last ? output : reduced[s % 2];
    const T* mine = static_cast<const T*>(inputs[chunk_received(s)]);
    for (size_t k = 0; k < segments; ++k) {
      TESSERA_CHECK(receives[s][k]->waitRecv(timeout), "timed out receiving from rank ", prev);
      // reduced[s % 2] was last sent at step s - 1.
      if (!last && s >= 2) wait_send(s - 1, k);
      const size_t offset = k * segment;
      reduce_values<T>(op, target + offset, received[s % 2] + offset, mine + offset, length(k));
      if (!last) post_send(s + 1, reduced[s % 2], k);
    }
  }
  for (int s = 0; s < steps; ++s) {
    for (size_t k = 0; k < segments; ++k) wait_send(s, k);
  }
}

}  // namespace

void ring_reduce_scatter(gloo::Context& context, const std::vector<const void*>& inputs,
                         void* output, size_t count, DType dtype, ReduceOp op, uint64_t slot_base,
                         std::chrono::milliseconds timeout, std::vector<uint8_t>& scratch) {
  if (count == 0) return;
  if (context.size == 1) {
    std::memcpy(output, inputs[0], count * dtype_size(dtype));
    return;
  }
  TESSERA_DISPATCH_NUMERIC(dtype, "reduce_scatter", [&] {
    ring<scalar_t>(context, inputs, static_cast<scalar_t*>(output), count, op, slot_base, timeout,
                   scratch);
  });
}

}  // namespace tessera::distributed
