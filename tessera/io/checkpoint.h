#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>

#include "tessera/core/state_dict.h"

namespace tessera::io {

// A training checkpoint: model, optimizer and learning-rate scheduler state
// (LRScheduler::state_dict(); empty without a scheduler), the step reached
// and, optionally, the random generator's (seed, offset).
struct Checkpoint {
  StateDict model;
  StateDict optimizer;
  int64_t step = 0;
  std::optional<std::pair<uint64_t, uint64_t>> rng;
  // Last, so aggregate initialisers written before it existed keep working.
  StateDict scheduler;
};

// Writes `checkpoint` as one safetensors file, atomically: model tensors
// under "model.", optimizer tensors under "optimizer.", scheduler tensors
// under "scheduler.", and metadata format
// "tessera-checkpoint", version "1", "step" and, if set, "rng_seed"/"rng_offset".
void save_checkpoint(const std::string& path, const Checkpoint& checkpoint);

// Reads a file written by save_checkpoint; throws naming the file when it is
// not a Tessera checkpoint, the metadata is malformed or a key has none of the prefixes.
Checkpoint load_checkpoint(const std::string& path);

}  // namespace tessera::io
