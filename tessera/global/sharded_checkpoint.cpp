#include "tessera/global/sharded_checkpoint.h"

#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "tessera/core/grad_mode.h"
#include "tessera/global/boxing.h"
#include "tessera/global/layout.h"
#include "tessera/global/process_groups.h"
#include "tessera/io/atomic_file_writer.h"
#include "tessera/io/safetensors.h"

namespace tessera::global {

namespace {

using nlohmann::json;

constexpr const char* kFormat = "tessera-sharded-1";

std::string shard_file(int rank) { return "shard-" + std::to_string(rank) + ".safetensors"; }

json sbp_json(const NdSbp& sbp) {
  json out = json::array();
  for (const Sbp& s : sbp.sbps()) out.push_back(sbp_str(s));
  return out;
}

}  // namespace

void save_sharded(const std::string& dir, const StateDict& state) {
  NoGradGuard no_grad;
  auto world = distributed::default_group();
  const int me = world->rank();
  std::error_code error;
  std::filesystem::create_directories(dir, error);
  TESSERA_CHECK(!error, "[save_sharded] cannot create '", dir, "': ", error.message());

  StateDict mine;
  json tensors = json::object();
  for (const auto& [key, value] : state) {
    json entry;
    entry["shape"] = value.shape();
    entry["dtype"] = dtype_name(value.dtype());
    json pieces = json::array();
    if (!value.is_global()) {
      // A local tensor is the same on every rank (SPMD): rank 0 keeps it.
      pieces.push_back({{"file", shard_file(0)},
                        {"start", std::vector<int64_t>(value.shape().size(), 0)},
                        {"size", value.shape()}});
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
      entry["placement"] = {{"ranks", placement.ranks()}, {"mesh", placement.mesh()}};
      entry["sbp"] = sbp_json(value.nd_sbp());
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
        pieces.push_back({{"file", shard_file(rank)}, {"start", region.start}, {"size", region.size}});
        if (rank == me) mine.insert(key, t.local_shard().contiguous());
      }
    }
    entry["pieces"] = pieces;
    tensors[key] = entry;
  }
  const std::filesystem::path folder(dir);
  if (!mine.empty()) io::save_safetensors((folder / shard_file(me)).string(), mine);
  world->barrier();  // every shard is on disk before the index names it
  if (me == 0) {
    json index{{"format", kFormat}, {"world_size", world->size()}, {"tensors", tensors}};
    const std::string text = index.dump(1);
    io::AtomicFileWriter writer((folder / "index.json").string(), "save_sharded");
    writer.write(text.data(), text.size());
    writer.commit();
  }
  world->barrier();
}

void load_sharded(const std::string& dir, const StateDict& state) {
  NoGradGuard no_grad;
  const std::filesystem::path folder(dir);
  const std::string index_path = (folder / "index.json").string();
  std::ifstream file(index_path);
  TESSERA_CHECK(file.good(), "[load_sharded] no index at '", index_path,
                "'; the folder holds no complete sharded checkpoint");
  json index;
  try {
    index = json::parse(file);
  } catch (const std::exception& error) {
    TESSERA_FAIL("[load_sharded] '", index_path, "' is not valid JSON: ", error.what());
  }
  TESSERA_CHECK(index.is_object() && index.value("format", "") == kFormat &&
                    index.contains("tensors") && index["tensors"].is_object(),
                "[load_sharded] '", index_path, "' is not a ", kFormat, " index");
  const json& tensors = index["tensors"];

  std::string missing, unexpected;
  for (const auto& [key, value] : state) {
    if (!tensors.contains(key)) missing += " " + key;
  }
  for (const auto& [key, entry] : tensors.items()) {
    if (!state.contains(key)) unexpected += " " + key;
  }
  TESSERA_CHECK(missing.empty() && unexpected.empty(), "[load_sharded] '", dir,
                "' does not match: missing keys:", missing.empty() ? " none" : missing,
                "; unexpected keys:", unexpected.empty() ? " none" : unexpected);

  const int me = world_rank();
  std::map<std::string, io::SafetensorsFile> files;
  auto open = [&](const std::string& name) -> const StateDict& {
    auto it = files.find(name);
    if (it == files.end()) it = files.emplace(name, io::load_safetensors((folder / name).string())).first;
    return it->second.tensors;
  };
  for (const auto& [key, target] : state) {
    const json& entry = tensors[key];
    Shape shape;
    std::string dtype;
    try {
      shape = entry.at("shape").get<Shape>();
      dtype = entry.at("dtype").get<std::string>();
    } catch (const std::exception& error) {
      TESSERA_FAIL("[load_sharded] '", index_path, "': entry '", key, "' is malformed: ", error.what());
    }
    TESSERA_CHECK(shape == target.shape() && dtype == dtype_name(target.dtype()), "[load_sharded] '",
                  key, "' is ", dtype, " ", shape_str(shape), " in the checkpoint but ",
                  dtype_name(target.dtype()), " ", shape_str(target.shape()), " here");
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
    for (const json& piece : entry.at("pieces")) {
      Region have{piece.at("start").get<std::vector<int64_t>>(), piece.at("size").get<Shape>()};
      TESSERA_CHECK(have.start.size() == shape.size() && have.size.size() == shape.size(),
                    "[load_sharded] '", index_path, "': a piece of '", key, "' has ",
                    have.start.size(), "-d coordinates for a ", shape.size(), "-d tensor");
      Region overlap = intersect(want, have);
      if (overlap.empty()) continue;
      for (const Region& earlier : used) {
        TESSERA_CHECK(intersect(earlier, overlap).empty(), "[load_sharded] '", index_path,
                      "': pieces of '", key, "' overlap; the index is corrupt");
      }
      used.push_back(overlap);
      const StateDict& tensors_in_file = open(piece.at("file").get<std::string>());
      const Tensor& stored = tensors_in_file.at(key);
      TESSERA_CHECK(stored.shape() == have.size, "[load_sharded] '", key, "' in ",
                    piece.at("file").get<std::string>(), " is ", shape_str(stored.shape()),
                    " but the index says ", shape_str(have.size));
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
