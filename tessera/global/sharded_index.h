#pragma once

// The index of a sharded checkpoint (sharded_checkpoint.h): what each tensor
// is and where its pieces lie. Parsing validates every field, so a tampered
// or corrupt index is an error naming the index and the entry, never a read
// or write outside a tensor or outside the checkpoint's folder.

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "tessera/core/dtype.h"
#include "tessera/core/shape.h"

namespace tessera::global {

// "tessera-sharded-2": one generation per save, named in the index and in
// every shard's metadata. "tessera-sharded-1" (no generation) still loads.
inline constexpr const char* kShardedFormat = "tessera-sharded-2";
inline constexpr const char* kShardedFormatV1 = "tessera-sharded-1";

// A box of one tensor stored in `file`, a plain name inside the folder.
struct IndexPiece {
  std::string file;
  std::vector<int64_t> start;
  Shape size;
};

struct IndexEntry {
  Shape shape;
  DType dtype = DType::f32;
  // How the tensor was laid out when saved (empty for a local tensor): for
  // people and tools reading the index; loading does not need them.
  std::vector<int64_t> placement_ranks;
  std::vector<int64_t> placement_mesh;
  std::vector<std::string> sbp;
  std::vector<IndexPiece> pieces;
};

struct ShardedIndex {
  std::string format = kShardedFormat;
  // 16 hex digits, fresh for every save; empty in a version-1 index.
  std::string generation;
  int world_size = 1;
  std::map<std::string, IndexEntry> tensors;
};

// The file name of `rank`'s shard in the save `generation`.
std::string shard_file_name(int rank, const std::string& generation);

// True for the names save_sharded writes or leaves behind when interrupted:
// shards of any generation and their temporary files, and the index's
// temporary files (not the index itself).
bool is_checkpoint_file(const std::string& name);

// Parses and validates index text; `name` (the index's path) labels errors.
// Every piece lies inside its tensor, names a plain file in the folder, and
// every number fits its type.
ShardedIndex parse_sharded_index(const std::string& text, const std::string& name);

// The JSON text of `index`.
std::string dump_sharded_index(const ShardedIndex& index);

}  // namespace tessera::global
