#include "tessera/global/sharded_checkpoint.h"

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <map>
#include <random>

#include "tessera/core/file.h"
#include "tessera/core/grad_mode.h"
#include "tessera/global/boxing.h"
#include "tessera/global/layout.h"
#include "tessera/global/process_groups.h"
#include "tessera/global/sharded_index.h"
#include "tessera/io/atomic_file_writer.h"
#include "tessera/io/safetensors.h"

namespace tessera::global {

namespace {

// A fresh generation id, the same on every rank: rank 0 draws it and
// broadcasts it.
std::string new_generation(distributed::Group& world) {
  Tensor bits = Tensor::empty({1}, DType::i64);
  if (world.rank() == 0) {
    std::random_device device;
    const uint64_t value =
        (static_cast<uint64_t>(device()) << 32) ^ device() ^
        static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
    *bits.data<int64_t>() = static_cast<int64_t>(value);
  }
  world.broadcast(bits, 0);
  char text[17];
  std::snprintf(text, sizeof text, "%016llx",
                static_cast<unsigned long long>(*bits.data<int64_t>()));
  return text;
}

// Removes what earlier saves left in `folder`: shards of other generations
// and the temporary files of interrupted writes. Runs once the new index is
// committed, when no rank of this job is writing there.
void remove_stale_files(const std::filesystem::path& folder, const std::string& generation) {
  const std::string current_suffix = "-" + generation + ".safetensors";
  std::error_code error;
  for (const auto& item : std::filesystem::directory_iterator(folder, error)) {
    const std::string name = item.path().filename().string();
    if (!is_checkpoint_file(name)) continue;
    const bool current = name.size() > current_suffix.size() &&
                         name.compare(name.size() - current_suffix.size(), current_suffix.size(),
                                      current_suffix) == 0;
    if (!current) std::filesystem::remove(item.path(), error);
  }
}

std::vector<int64_t> to_int64(const std::vector<int>& values) {
  return std::vector<int64_t>(values.begin(), values.end());
}

std::string read_index(const std::string& path) {
  std::error_code error;
  TESSERA_CHECK(std::filesystem::exists(std::filesystem::symlink_status(path, error)),
                "[load_sharded] no index at '", path,
                "'; the folder holds no complete sharded checkpoint");
  return read_regular_file(path, "load_sharded", uint64_t{1} << 30);
}

}  // namespace

void save_sharded(const std::string& dir, const StateDict& state) {
  NoGradGuard no_grad;
  auto world = distributed::default_group();
  const int me = world->rank();
  std::error_code error;
  std::filesystem::create_directories(dir, error);
  TESSERA_CHECK(!error, "[save_sharded] cannot create '", dir, "': ", error.message());

  ShardedIndex index;
  index.generation = new_generation(*world);
  index.world_size = world->size();
  const std::string my_file = shard_file_name(me, index.generation);
  StateDict mine;
  for (const auto& [key, value] : state) {
    IndexEntry entry;
    entry.shape = value.shape();
    entry.dtype = value.dtype();
    if (!value.is_global()) {
      // A local tensor is the same on every rank (SPMD): rank 0 keeps it.
      entry.pieces.push_back({shard_file_name(0, index.generation),
                              std::vector<int64_t>(value.shape().size(), 0), value.shape()});
      if (me == 0) mine.insert(key, value.contiguous());
    } else {
      Tensor t = value;
      if (t.nd_sbp().any_partial()) {
        std::vector<Sbp> sbps = t.nd_sbp().sbps();
        for (Sbp& s : sbps) {
          if (s.is_partial()) s = Sbp::broadcast();
        }
        t = box(t, t.placement(), NdSbp(sbps));
      }
      const Placement& placement = t.placement();
      entry.placement_ranks = to_int64(placement.ranks());
      entry.placement_mesh = placement.mesh();
      for (const Sbp& s : value.nd_sbp().sbps()) entry.sbp.push_back(sbp_str(s));
      for (int i = 0; i < placement.size(); ++i) {
        // One writer per region: the copy at coordinate 0 of every unsplit axis.
        std::vector<int64_t> coord = placement.coordinate(i);
        bool writer = true;
        for (int a = 0; a < t.nd_sbp().ndim(); ++a) {
          writer = writer && (t.nd_sbp()[a].is_split() || coord[static_cast<size_t>(a)] == 0);
        }
        if (!writer) continue;
        const int rank = placement.ranks()[static_cast<size_t>(i)];
        Region region = shard_region(t.shape(), placement, t.nd_sbp(), i);
        entry.pieces.push_back(
            {shard_file_name(rank, index.generation), region.start, region.size});
        if (rank == me) mine.insert(key, t.local_shard().contiguous());
      }
    }
    index.tensors.emplace(key, std::move(entry));
  }
  // New names for every save: the previous checkpoint's files stay untouched
  // until the index naming the new ones is committed, so an interrupted save
  // leaves the previous checkpoint whole.
  const std::filesystem::path folder(dir);
  if (!mine.empty()) {
    io::save_safetensors((folder / my_file).string(), mine,
                         {{"format", kShardedFormat},
                          {"generation", index.generation},
                          {"rank", std::to_string(me)}});
  }
  world->barrier();  // every shard is on disk before the index names it
  if (me == 0) {
    const std::string text = dump_sharded_index(index);
    io::AtomicFileWriter writer((folder / "index.json").string(), "save_sharded");
    writer.write(text.data(), text.size());
    writer.commit();  // the commit point: from here on the folder is the new checkpoint
    remove_stale_files(folder, index.generation);
  }
  world->barrier();
}

void load_sharded(const std::string& dir, const StateDict& state) {
  NoGradGuard no_grad;
  const std::filesystem::path folder(dir);
  const std::string index_path = (folder / "index.json").string();
  const ShardedIndex index = parse_sharded_index(read_index(index_path), index_path);

  std::string missing, unexpected;
  for (const auto& [key, value] : state) {
    if (index.tensors.find(key) == index.tensors.end()) missing += " " + key;
  }
  for (const auto& [key, entry] : index.tensors) {
    if (!state.contains(key)) unexpected += " " + key;
  }
  TESSERA_CHECK(missing.empty() && unexpected.empty(), "[load_sharded] '", dir,
                "' does not match: missing keys:", missing.empty() ? " none" : missing,
                "; unexpected keys:", unexpected.empty() ? " none" : unexpected);

  const int me = world_rank();
  std::map<std::string, io::SafetensorsFile> files;
  auto open = [&](const std::string& name) -> const StateDict& {
    auto it = files.find(name);
    if (it != files.end()) return it->second.tensors;
    const std::filesystem::path path = folder / name;
    std::error_code error;
    TESSERA_CHECK(!std::filesystem::is_symlink(path, error), "[load_sharded] '", path.string(),
                  "' is a symbolic link; shards must be files inside the checkpoint's folder");
    io::SafetensorsFile file = io::load_safetensors(path.string());
    if (!index.generation.empty()) {
      auto found = file.metadata.find("generation");
      const std::string generation = found == file.metadata.end() ? "none" : found->second;
      TESSERA_CHECK(generation == index.generation, "[load_sharded] shard '", path.string(),
                    "' belongs to save ", generation, " but the index '", index_path,
                    "' is of save ", index.generation,
                    ": the folder mixes two saves; it is not a checkpoint");
    }
    return files.emplace(name, std::move(file)).first->second.tensors;
  };
  for (const auto& [key, target] : state) {
    const IndexEntry& entry = index.tensors.at(key);
    const Shape& shape = entry.shape;
    TESSERA_CHECK(shape == target.shape() && entry.dtype == target.dtype(), "[load_sharded] '", key,
                  "' is ", dtype_name(entry.dtype), " ", shape_str(shape),
                  " in the checkpoint but ", dtype_name(target.dtype()), " ",
                  shape_str(target.shape()), " here");
    // The region this rank needs, and whether it holds zeros (a partial-sum copy).
    Region want{std::vector<int64_t>(shape.size(), 0), shape};
    Tensor local = target;
    if (target.is_global()) {
      const int i = target.placement().index_of(me);
      if (i < 0) continue;
      std::vector<Sbp> sbps = target.nd_sbp().sbps();
      std::vector<int64_t> coord = target.placement().coordinate(i);
      bool zeros = false;
      for (size_t a = 0; a < sbps.size(); ++a) {
        zeros = zeros || (sbps[a].kind == SbpKind::partial_sum && coord[a] != 0);
        if (sbps[a].is_partial()) sbps[a] = Sbp::broadcast();
      }
      local = target.local_shard();
      if (zeros) {
        local.zero_();
        continue;
      }
      want = shard_region(shape, target.placement(), NdSbp(sbps), i);
    }
    Tensor assembled = Tensor::empty(want.size, target.dtype());
    int64_t covered = 0;
    std::vector<Region> used;  // so that overlapping pieces cannot fake full coverage
    for (const IndexPiece& piece : entry.pieces) {
      const Region have{piece.start, piece.size};
      Region overlap = intersect(want, have);
      if (overlap.empty()) continue;
      for (const Region& earlier : used) {
        TESSERA_CHECK(intersect(earlier, overlap).empty(), "[load_sharded] '", index_path,
                      "': pieces of '", key, "' overlap; the index is corrupt");
      }
      used.push_back(overlap);
      const StateDict& tensors_in_file = open(piece.file);
      TESSERA_CHECK(tensors_in_file.contains(key), "[load_sharded] '", piece.file,
                    "' holds no tensor '", key, "', which the index places there");
      const Tensor& stored = tensors_in_file.at(key);
      TESSERA_CHECK(stored.shape() == have.size && stored.dtype() == entry.dtype,
                    "[load_sharded] '", key, "' in ", piece.file, " is ",
                    dtype_name(stored.dtype()), " ", shape_str(stored.shape()),
                    " but the index says ", dtype_name(entry.dtype), " ", shape_str(have.size));
      std::vector<int64_t> from(shape.size()), to(shape.size());
      for (size_t d = 0; d < shape.size(); ++d) {
        from[d] = overlap.start[d] - have.start[d];
        to[d] = overlap.start[d] - want.start[d];
      }
      write_region(assembled, to, read_region(stored, from, overlap.size));
      covered += overlap.numel();
    }
    TESSERA_CHECK(covered == want.numel(), "[load_sharded] the pieces of '", key, "' cover ",
                  covered, " of the ", want.numel(), " elements this rank needs; the checkpoint is "
                  "incomplete");
    local.copy_(assembled);
  }
}

}  // namespace tessera::global
