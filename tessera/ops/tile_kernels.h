#pragma once

// Tile kernels: an elementwise op's work over one flat run of f32
// elements, for the graph's fused elementwise nodes (graph/passes/
// elementwise_fusion.cpp). A fused node runs a chain of ops tile by tile, so
// the intermediate values stay in cache instead of making a full tensor
// each. A backend registers them beside its ordinary kernels, from the same
// functors, so a fused chain computes what the unfused ops would.

#include <string_view>

#include "tessera/ops/attrs.h"

namespace tessera {

// One call: `n` outputs from inputs that each hold `n` elements, or one
// element that every output reads (`scalar[k]`).
struct TileArgs {
  const float* const* inputs;
  const bool* scalar;
  float* out;
  int64_t n;
};
using TileKernel = void (*)(const Attrs& attrs, const TileArgs& args);

// Registers the tile kernel of op `op` (one per op); returns true, for use
// in a static initialiser.
bool register_tile_kernel(std::string_view op, TileKernel kernel);
// The op's tile kernel, or null when it has none.
TileKernel tile_kernel(std::string_view op);

}  // namespace tessera
