#pragma once

// Sharded checkpoints (DESIGN §9): every rank writes the pieces it alone is
// responsible for to its own safetensors file, and rank 0 writes an index
// with each tensor's logical shape, dtype, placement, SBP and where its
// pieces lie. Loading fills tensors of any layout, on any world size, by
// reading the pieces that overlap each rank's region: a checkpoint saved
// with tensor parallelism on 4 ranks loads into data parallelism on 2, or
// into one process.
//
// Layout of a checkpoint folder:
//   index.json                            written last, atomically: the commit
//   shard-<rank>-<generation>.safetensors
// Every save writes a new generation (16 hex digits, in the index and in
// every shard's metadata) under new names, so the previous checkpoint stays
// whole until the new index replaces the old one; an interrupted save leaves
// the previous checkpoint loadable, and the next save removes the leftovers.
// Loading checks that every shard it reads is of the index's generation.

#include <string>

#include "tessera/core/state_dict.h"

namespace tessera::global {

// Saves `state` (global and local tensors) into `dir` (created if needed).
// Every rank of the default group calls it. Broadcast copies are written
// once; partial tensors are reduced first. The index is written after every
// shard is complete, and files of earlier saves are removed after it.
void save_sharded(const std::string& dir, const StateDict& state);

// Fills every tensor of `state` in place (model.state_dict() handles, so the
// model and its optimizer see the values) from the checkpoint in `dir`,
// whatever layout each tensor has now. Every rank calls it. Strict: a key
// missing from the checkpoint, an extra one, or a shape or dtype mismatch is
// an error naming the keys.
void load_sharded(const std::string& dir, const StateDict& state);

}  // namespace tessera::global
