#pragma once

// Tile kernels: an elementwise op's work over one flat run of f32
// elements, for the graph's fused elementwise nodes (graph/passes/
// elementwise_fusion.cpp). A fused node runs a chain of ops tile by tile, so
// the intermediate values stay in cache instead of making a full tensor
// each. A backend registers them beside its ordinary kernels, from the same
// functors, so a fused chain computes what the unfused ops would.

#include <cstddef>
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

// A chain kernel runs a whole fused program at once when its steps form one
// chain (each step reads inputs and at most the step before it) of ops the
// backend knows: the value stays in registers from step to step instead of
// going through a tile in memory. `op(name)` gives the backend's id of an
// op, or -1 (an op it lacks, or a CPU without the instructions); a program
// is matched against it once, when it is planned.
struct ChainStep {
  int op;           // the backend's id, from ChainKernel::op
  int arity;        // 1 or 2
  int operands[2];  // input k of ChainArgs, or -1: the step before's value
  float* out;       // where the step's value is written too (a result), or null
};
struct ChainArgs {
  const float* const* inputs;  // n elements each, or one (scalar[k])
  const bool* scalar;
  int64_t n;
};
struct ChainKernel {
  int (*op)(std::string_view name) = nullptr;
  void (*run)(const ChainStep* steps, size_t count, const ChainArgs& args) = nullptr;
};
// The most steps a chain kernel runs (a longer program runs tile by tile).
constexpr size_t kMaxChainSteps = 64;
// Registers the backend's chain kernel (one at most); returns true.
bool register_chain_kernel(ChainKernel kernel);
// The chain kernel, or one whose `op` is null when none is registered.
ChainKernel chain_kernel();

}  // namespace tessera
