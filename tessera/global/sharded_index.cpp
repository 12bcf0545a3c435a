#include "tessera/global/sharded_index.h"

#include <limits>
#include <nlohmann/json.hpp>
#include <regex>

#include "tessera/core/error.h"

namespace tessera::global {

namespace {

using nlohmann::json;

// Shards: "shard-<rank>-<generation>.safetensors" (version 1 wrote
// "shard-<rank>.safetensors"); an interrupted atomic write leaves
// "<name>.tmp-<host>-<pid>-<n>".
const std::regex& shard_pattern() {
  static const std::regex pattern(R"(shard-[0-9]+(-[0-9a-f]{16})?\.safetensors)");
  return pattern;
}
const std::regex& leftover_pattern() {
  static const std::regex pattern(
      R"((shard-[0-9]+(-[0-9a-f]{16})?\.safetensors|index\.json)\.tmp-.+)");
  return pattern;
}

// A short description of a JSON value for messages (a hostile index may
// hold megabytes in one value).
std::string brief(const json& value) {
  if (value.is_array()) return str_cat("an array of ", value.size(), " values");
  if (value.is_object()) return str_cat("an object of ", value.size(), " members");
  std::string text = value.dump();
  return text.size() > 60 ? text.substr(0, 57) + "..." : text;
}

class Reader {
 public:
  explicit Reader(const std::string& name) : name_(name) {}

  template <typename... Args>
  [[noreturn]] void fail(const Args&... args) const {
    TESSERA_FAIL("[load_sharded] index '", name_, "': ", args..., "; the index is corrupt");
  }

  const json& field(const json& object, const char* key, const std::string& where) const {
    auto it = object.find(key);
    if (it == object.end()) fail(where, " has no '", key, "'");
    return *it;
  }

  std::string string(const json& value, const std::string& what) const {
    if (!value.is_string()) fail(what, " must be a string, got ", brief(value));
    return value.get<std::string>();
  }

  int64_t integer(const json& value, const std::string& what, int64_t low, int64_t high) const {
    if (!value.is_number_integer()) fail(what, " must be an integer, got ", brief(value));
    // Unsigned values above INT64_MAX are out of range whatever `high` is.
    if (value.is_number_unsigned() &&
        value.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      fail(what, " is ", brief(value), "; valid: ", low, "..", high);
    }
    const int64_t number = value.get<int64_t>();
    if (number < low || number > high) fail(what, " is ", number, "; valid: ", low, "..", high);
    return number;
  }

  std::vector<int64_t> integers(const json& value, const std::string& what, int64_t low,
                                int64_t high) const {
    if (!value.is_array()) fail(what, " must be an array of integers, got ", brief(value));
    std::vector<int64_t> out;
    for (const json& item : value) out.push_back(integer(item, what + " element", low, high));
    return out;
  }

 private:
  const std::string& name_;
};

constexpr int64_t kMaxInt64 = std::numeric_limits<int64_t>::max();
constexpr size_t kMaxDims = 64;

IndexEntry parse_entry(const Reader& reader, const std::string& key, const json& value) {
  const std::string where = "tensor '" + key + "'";
  if (!value.is_object()) reader.fail(where, " must be an object, got ", brief(value));
  IndexEntry entry;
  entry.shape =
      reader.integers(reader.field(value, "shape", where), where + " shape", 0, kMaxInt64);
  if (entry.shape.size() > kMaxDims) reader.fail(where, " has ", entry.shape.size(), " dims");
  int64_t elements = 1;
  for (int64_t size : entry.shape) {
    if (__builtin_mul_overflow(elements, std::max<int64_t>(size, 1), &elements)) {
      reader.fail(where, " shape ", shape_str(entry.shape),
                  " has more elements than fit in 64 bits");
    }
  }
  const std::string dtype = reader.string(reader.field(value, "dtype", where), where + " dtype");
  try {
    entry.dtype = dtype_from_name(dtype);
  } catch (const Error&) {
    reader.fail(where, " has dtype '", dtype, "', which is not a Tessera dtype");
  }
  if (auto placement = value.find("placement"); placement != value.end()) {
    if (!placement->is_object()) reader.fail(where, " placement must be an object");
    entry.placement_ranks = reader.integers(reader.field(*placement, "ranks", where + " placement"),
                                            where + " placement ranks", 0, kMaxInt64);
    entry.placement_mesh = reader.integers(reader.field(*placement, "mesh", where + " placement"),
                                           where + " placement mesh", 1, kMaxInt64);
  }
  if (auto sbp = value.find("sbp"); sbp != value.end()) {
    if (!sbp->is_array()) reader.fail(where, " sbp must be an array of strings");
    for (const json& item : *sbp) entry.sbp.push_back(reader.string(item, where + " sbp"));
  }

  const json& pieces = reader.field(value, "pieces", where);
  if (!pieces.is_array()) reader.fail(where, " pieces must be an array, got ", brief(pieces));
  for (const json& item : pieces) {
    const std::string piece_where = where + " piece " + std::to_string(entry.pieces.size());
    if (!item.is_object()) reader.fail(piece_where, " must be an object, got ", brief(item));
    IndexPiece piece;
    piece.file = reader.string(reader.field(item, "file", piece_where), piece_where + " file");
    // Only a shard name: no folder part, so nothing outside the checkpoint's
    // folder can be read.
    if (piece.file.size() > 255 || !std::regex_match(piece.file, shard_pattern())) {
      reader.fail(piece_where, " names file '", piece.file.substr(0, 80),
                  "'; valid: a shard of this folder such as 'shard-0-<generation>.safetensors'");
    }
    piece.start = reader.integers(reader.field(item, "start", piece_where), piece_where + " start",
                                  0, kMaxInt64);
    piece.size = reader.integers(reader.field(item, "size", piece_where), piece_where + " size", 0,
                                 kMaxInt64);
    if (piece.start.size() != entry.shape.size() || piece.size.size() != entry.shape.size()) {
      reader.fail(piece_where, " has ", piece.start.size(), "-d start and ", piece.size.size(),
                  "-d size for a ", entry.shape.size(), "-d tensor");
    }
    for (size_t d = 0; d < entry.shape.size(); ++d) {
      int64_t end = 0;
      if (__builtin_add_overflow(piece.start[d], piece.size[d], &end) || end > entry.shape[d]) {
        reader.fail(piece_where, " spans [", piece.start[d], ", ", piece.start[d], " + ",
                    piece.size[d], ") in dim ", d, ", outside the tensor's shape ",
                    shape_str(entry.shape));
      }
    }
    entry.pieces.push_back(std::move(piece));
  }
  return entry;
}

}  // namespace

std::string shard_file_name(int rank, const std::string& generation) {
  return "shard-" + std::to_string(rank) + (generation.empty() ? "" : "-" + generation) +
         ".safetensors";
}

bool is_checkpoint_file(const std::string& name) {
  return name.size() <= 255 &&
         (std::regex_match(name, shard_pattern()) || std::regex_match(name, leftover_pattern()));
}

ShardedIndex parse_sharded_index(const std::string& text, const std::string& name) {
  Reader reader(name);
  // A valid index nests 6 deep; deeper input is refused while parsing, so a
  // hostile one cannot make the (recursive) walk over the tree run deep.
  constexpr int kMaxDepth = 10;
  bool too_deep = false;
  json::parser_callback_t limit_depth = [&](int depth, json::parse_event_t, json&) {
    too_deep = too_deep || depth > kMaxDepth;
    return !too_deep;
  };
  json root;
  try {
    root = json::parse(text, limit_depth);
  } catch (const json::exception& error) {
    TESSERA_FAIL("[load_sharded] index '", name, "' is not valid JSON: ", error.what());
  }
  if (too_deep) reader.fail("it nests deeper than ", kMaxDepth, " levels");
  if (!root.is_object()) reader.fail("the index must be an object, got ", brief(root));
  ShardedIndex index;
  index.format = reader.string(reader.field(root, "format", "the index"), "format");
  if (index.format != kShardedFormat && index.format != kShardedFormatV1) {
    reader.fail("format is '", index.format.substr(0, 40), "'; valid: ", kShardedFormat, " or ",
                kShardedFormatV1);
  }
  if (index.format == kShardedFormat) {
    index.generation = reader.string(reader.field(root, "generation", "the index"), "generation");
    static const std::regex hex16("[0-9a-f]{16}");
    if (!std::regex_match(index.generation, hex16)) {
      reader.fail("generation '", index.generation.substr(0, 40), "' is not 16 hex digits");
    }
  }
  index.world_size =
      static_cast<int>(reader.integer(reader.field(root, "world_size", "the index"), "world_size",
                                      1, std::numeric_limits<int>::max()));
  const json& tensors = reader.field(root, "tensors", "the index");
  if (!tensors.is_object()) reader.fail("'tensors' must be an object, got ", brief(tensors));
  for (const auto& [key, value] : tensors.items()) {
    index.tensors.emplace(key, parse_entry(reader, key, value));
  }
  return index;
}

std::string dump_sharded_index(const ShardedIndex& index) {
  json tensors = json::object();
  for (const auto& [key, entry] : index.tensors) {
    json item{{"shape", entry.shape}, {"dtype", dtype_name(entry.dtype)}};
    if (!entry.placement_ranks.empty()) {
      item["placement"] = {{"ranks", entry.placement_ranks}, {"mesh", entry.placement_mesh}};
      item["sbp"] = entry.sbp;
    }
    json pieces = json::array();
    for (const IndexPiece& piece : entry.pieces) {
      pieces.push_back({{"file", piece.file}, {"start", piece.start}, {"size", piece.size}});
    }
    item["pieces"] = std::move(pieces);
    tensors[key] = std::move(item);
  }
  json root{{"format", index.format},
            {"generation", index.generation},
            {"world_size", index.world_size},
            {"tensors", std::move(tensors)}};
  return root.dump(1);
}

}  // namespace tessera::global
