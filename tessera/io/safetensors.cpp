#include "tessera/io/safetensors.h"

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>
#include <numeric>
#include <optional>
#include <set>
#include <vector>

#include "tessera/core/error.h"
#include "tessera/core/file.h"
#include "tessera/io/atomic_file_writer.h"

namespace tessera::io {

// Tensor bytes are copied as they are, and safetensors is little-endian.
static_assert(std::endian::native == std::endian::little,
              "tessera/io/safetensors assumes a little-endian host");

namespace {

using Json = nlohmann::ordered_json;

// The reference implementation's limit; a larger header is corrupt or hostile.
constexpr uint64_t kMaxHeaderSize = 100'000'000;
constexpr const char* kMetadataKey = "__metadata__";

struct DTypeName {
  const char* name;
  DType dtype;
};
constexpr DTypeName kDTypeNames[] = {
    {"F64", DType::f64}, {"F32", DType::f32}, {"F16", DType::f16}, {"BF16", DType::bf16},
    {"I64", DType::i64}, {"I32", DType::i32}, {"U8", DType::u8},   {"BOOL", DType::boolean}};
constexpr const char* kSupportedNames = "F64, F32, F16, BF16, I64, I32, U8, BOOL";

const char* safetensors_name(DType dtype) {
  for (const DTypeName& entry : kDTypeNames) {
    if (entry.dtype == dtype) return entry.name;
  }
  TESSERA_FAIL("[save_safetensors] dtype ", dtype_name(dtype), " has no safetensors name");
}

std::optional<DType> dtype_from_safetensors(const std::string& name) {
  for (const DTypeName& entry : kDTypeNames) {
    if (name == entry.name) return entry.dtype;
  }
  return std::nullopt;
}

// A JSON value for an error message, cut short: a hostile header may hold
// megabytes in one value.
std::string brief(const Json& value) {
  // Arrays and objects are described, not dumped: dumping recurses once per
  // nesting level, which a hostile header can make deep enough to overflow
  // the stack.
  if (value.is_array()) return str_cat("an array of ", value.size(), " values");
  if (value.is_object()) return str_cat("an object of ", value.size(), " members");
  std::string text = value.dump();
  if (text.size() > 80) text = text.substr(0, 77) + "...";
  return text;
}

template <typename... Args>
[[noreturn]] void fail(const std::string& name, const Args&... args) {
  TESSERA_FAIL("[load_safetensors] '", name, "': ", args...);
}

template <typename... Args>
[[noreturn]] void fail_key(const std::string& name, const std::string& key, const Args&... args) {
  TESSERA_FAIL("[load_safetensors] '", name, "': tensor '", key, "': ", args...);
}

template <typename... Args>
[[noreturn]] void fail_save(const std::string& path, const Args&... args) {
  TESSERA_FAIL("[save_safetensors] '", path, "': ", args...);
}

// One tensor as the header describes it; offsets are relative to the byte
// buffer after the header.
struct Entry {
  std::string key;
  DType dtype;
  Shape shape;
  uint64_t begin = 0;
  uint64_t end = 0;
};

// Parses the JSON header. Duplicate keys are an error (nlohmann would keep
// one silently), so a parser callback records them.
Json parse_header(const char* text, size_t size, const std::string& name) {
  if (size == 0 || text[0] != '{') {
    fail(name, "the header must be a JSON object starting with '{'");
  }
  std::vector<std::set<std::string>> open_objects;
  std::optional<std::string> duplicate;
  // A valid header nests 3 deep ({"key": {"shape": [..]}}); deeper input is
  // refused, since the parsed tree is later walked recursively.
  constexpr int kMaxDepth = 8;
  bool too_deep = false;
  Json::parser_callback_t callback = [&](int depth, Json::parse_event_t event, Json& parsed) {
    if (depth > kMaxDepth) {
      too_deep = true;
      return false;
    }
    if (event == Json::parse_event_t::object_start) {
      open_objects.emplace_back();
    } else if (event == Json::parse_event_t::object_end) {
      if (!open_objects.empty()) open_objects.pop_back();
    } else if (event == Json::parse_event_t::key && !open_objects.empty() && parsed.is_string()) {
      const auto& key = parsed.get_ref<const std::string&>();
      if (!open_objects.back().insert(key).second && !duplicate) duplicate = key;
    }
    return true;
  };
  Json header;
  try {
    header = Json::parse(text, text + size, callback);
  } catch (const Json::exception& error) {
    fail(name, "the header is not valid JSON: ", error.what());
  }
  if (too_deep) {
    fail(name, "the header nests deeper than ", kMaxDepth, " levels; a safetensors header nests 3");
  }
  if (duplicate) fail(name, "duplicate key '", *duplicate, "' in the header");
  if (!header.is_object()) fail(name, "the header must be a JSON object, got ", brief(header));
  return header;
}

std::map<std::string, std::string> parse_metadata(const Json& value, const std::string& name) {
  if (!value.is_object()) {
    fail(name, "'", kMetadataKey, "' must be an object of strings, got ", brief(value));
  }
  std::map<std::string, std::string> metadata;
  for (const auto& [key, text] : value.items()) {
    if (!text.is_string()) {
      fail(name, "metadata '", key, "' must be a string, got ", brief(text));
    }
    metadata.emplace(key, text.get<std::string>());
  }
  return metadata;
}

Entry parse_entry(const std::string& key, const Json& value, uint64_t buffer_size,
                  const std::string& name) {
  if (!value.is_object()) {
    fail_key(name, key, "entry must be an object with dtype, shape and data_offsets, got ",
             brief(value));
  }
  Entry entry;
  entry.key = key;

  const auto dtype_field = value.find("dtype");
  if (dtype_field == value.end() || !dtype_field->is_string()) {
    fail_key(name, key, "'dtype' must be a string such as \"F32\"");
  }
  const auto dtype = dtype_from_safetensors(dtype_field->get<std::string>());
  if (!dtype) {
    fail_key(name, key, "dtype ", brief(*dtype_field),
             " is not supported by Tessera; supported: ", kSupportedNames);
  }
  entry.dtype = *dtype;

  const auto shape_field = value.find("shape");
  if (shape_field == value.end() || !shape_field->is_array()) {
    fail_key(name, key, "'shape' must be an array of non-negative integers");
  }
  // The product of the non-zero dims must fit: strides are computed from it
  // even when a zero dim makes the tensor empty.
  int64_t nonzero_product = 1;
  for (const Json& dim : *shape_field) {
    if (!dim.is_number_unsigned()) {
      fail_key(name, key, "shape ", brief(*shape_field), " has dimension ", brief(dim),
               "; dims must be non-negative integers");
    }
    const uint64_t size = dim.get<uint64_t>();
    if (size > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) ||
        (size != 0 &&
         __builtin_mul_overflow(nonzero_product, static_cast<int64_t>(size), &nonzero_product))) {
      fail_key(name, key, "shape ", brief(*shape_field), " has more elements than fit in 64 bits");
    }
    entry.shape.push_back(static_cast<int64_t>(size));
  }

  const auto offsets_field = value.find("data_offsets");
  if (offsets_field == value.end() || !offsets_field->is_array() || offsets_field->size() != 2 ||
      !(*offsets_field)[0].is_number_unsigned() || !(*offsets_field)[1].is_number_unsigned()) {
    fail_key(name, key, "'data_offsets' must be two non-negative integers [begin, end], got ",
             offsets_field == value.end() ? std::string("nothing") : brief(*offsets_field));
  }
  entry.begin = (*offsets_field)[0].get<uint64_t>();
  entry.end = (*offsets_field)[1].get<uint64_t>();
  if (entry.end < entry.begin) {
    fail_key(name, key, "data_offsets [", entry.begin, ", ", entry.end, "] end before they begin");
  }
  uint64_t expected_bytes = 0;
  if (__builtin_mul_overflow(static_cast<uint64_t>(numel(entry.shape)),
                             static_cast<uint64_t>(dtype_size(entry.dtype)), &expected_bytes) ||
      entry.end - entry.begin != expected_bytes) {
    fail_key(name, key, "data_offsets [", entry.begin, ", ", entry.end, "] hold ",
             entry.end - entry.begin, " bytes but shape ", shape_str(entry.shape), " of ",
             dtype_field->get<std::string>(), " needs ", numel(entry.shape), " x ",
             dtype_size(entry.dtype), " bytes");
  }
  if (entry.end > buffer_size) {
    fail_key(name, key, "data_offsets [", entry.begin, ", ", entry.end, "] run past the ",
             buffer_size, "-byte data buffer");
  }
  return entry;
}

// safetensors requires the tensors to tile the byte buffer exactly: no
// overlap (two tensors aliasing bytes) and no gap (hidden bytes).
void check_coverage(const std::vector<Entry>& entries, uint64_t buffer_size,
                    const std::string& name) {
  std::vector<size_t> order(entries.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return std::pair(entries[a].begin, entries[a].end) <
           std::pair(entries[b].begin, entries[b].end);
  });
  uint64_t covered = 0;
  const Entry* previous = nullptr;
  for (size_t index : order) {
    const Entry& entry = entries[index];
    if (entry.begin < covered) {
      fail(name, "tensor '", entry.key, "' bytes [", entry.begin, ", ", entry.end,
           ") overlap tensor '", previous->key, "' bytes [", previous->begin, ", ", previous->end,
           ")");
    }
    if (entry.begin > covered) {
      fail(name, "bytes [", covered, ", ", entry.begin, ") of the data buffer before tensor '",
           entry.key, "' belong to no tensor; safetensors requires the tensors to cover it");
    }
    covered = entry.end;
    previous = &entry;
  }
  if (covered != buffer_size) {
    fail(name, "the data buffer has ", buffer_size, " bytes but the tensors cover only ", covered,
         previous ? " (the last is '" + previous->key + "')" : std::string(" (no tensors)"),
         "; trailing bytes belong to no tensor");
  }
}

// A BOOL element other than 0 or 1 would be undefined behaviour as a C++ bool.
void check_bools(const Entry& entry, const uint8_t* bytes, const std::string& name) {
  if (entry.dtype != DType::boolean) return;
  for (size_t i = 0; i < entry.end - entry.begin; ++i) {
    if (bytes[i] > 1) {
      fail_key(name, entry.key, "BOOL element ", i, " has byte value ", int(bytes[i]),
               "; BOOL bytes must be 0 or 1");
    }
  }
}

// What the header says: the metadata and where each tensor's bytes lie.
struct Layout {
  std::map<std::string, std::string> metadata;
  std::vector<Entry> entries;
};

// The 8-byte header length, checked against the file's size.
uint64_t header_length(const uint8_t* first8, uint64_t file_size, const std::string& name) {
  if (file_size < 8) {
    fail(name, "the file has ", file_size, " bytes, fewer than the 8-byte header length");
  }
  uint64_t header_size = 0;
  std::memcpy(&header_size, first8, 8);
  if (header_size > kMaxHeaderSize) {
    fail(name, "header length ", header_size, " is absurd (more than ", kMaxHeaderSize,
         " bytes); the file is corrupt or not safetensors");
  }
  if (header_size > file_size - 8) {
    fail(name, "header length ", header_size, " runs past the end of the ", file_size,
         "-byte file");
  }
  return header_size;
}

Layout parse_layout(const char* header_text, uint64_t header_size, uint64_t buffer_size,
                    const std::string& name) {
  const Json header = parse_header(header_text, static_cast<size_t>(header_size), name);
  Layout layout;
  for (const auto& [key, value] : header.items()) {
    if (key == kMetadataKey) {
      layout.metadata = parse_metadata(value, name);
    } else {
      layout.entries.push_back(parse_entry(key, value, buffer_size, name));
    }
  }
  check_coverage(layout.entries, buffer_size, name);
  return layout;
}

}  // namespace

SafetensorsFile parse_safetensors(const uint8_t* data, size_t size, const std::string& name) {
  const uint64_t header_size = header_length(data, size, name);
  const uint64_t buffer_size = size - 8 - header_size;
  Layout layout =
      parse_layout(reinterpret_cast<const char*>(data + 8), header_size, buffer_size, name);
  const uint8_t* buffer = data + 8 + header_size;
  SafetensorsFile file;
  file.metadata = std::move(layout.metadata);
  for (const Entry& entry : layout.entries) {
    check_bools(entry, buffer + entry.begin, name);
    Tensor tensor = Tensor::empty(entry.shape, entry.dtype);
    if (entry.end > entry.begin) {
      std::memcpy(tensor.raw_data(), buffer + entry.begin, entry.end - entry.begin);
    }
    file.tensors.insert(entry.key, tensor);
  }
  return file;
}

SafetensorsFile load_safetensors(const std::string& path) {
  // Read, not mapped: a file truncated by another process while it loads is
  // then an error rather than SIGBUS, and each tensor's bytes go straight
  // into its storage, so the checkpoint is still held in memory once.
  const RegularFile source(path, "load_safetensors");
  uint8_t first8[8] = {};
  if (source.size() >= 8) source.read_at(first8, 8, 0);
  const uint64_t header_size = header_length(first8, source.size(), path);
  std::string header(static_cast<size_t>(header_size), '\0');
  source.read_at(header.data(), header.size(), 8);
  const uint64_t data_start = 8 + header_size;
  Layout layout = parse_layout(header.data(), header_size, source.size() - data_start, path);
  SafetensorsFile file;
  file.metadata = std::move(layout.metadata);
  for (const Entry& entry : layout.entries) {
    Tensor tensor = Tensor::empty(entry.shape, entry.dtype);
    const size_t bytes = entry.end - entry.begin;
    if (bytes > 0) {
      source.read_at(tensor.raw_data(), bytes, data_start + entry.begin);
      check_bools(entry, static_cast<const uint8_t*>(tensor.raw_data()), path);
    }
    file.tensors.insert(entry.key, tensor);
  }
  return file;
}

void save_safetensors(const std::string& path, const StateDict& tensors,
                      const std::map<std::string, std::string>& metadata) {
  std::vector<Tensor> dense;
  dense.reserve(tensors.size());
  for (const auto& [key, value] : tensors) {
    if (key == kMetadataKey) fail_save(path, "'", kMetadataKey, "' is reserved; rename the tensor");
    if (!value.defined()) fail_save(path, "tensor '", key, "' is undefined");
    if (value.device().type != DeviceType::cpu) {
      fail_save(path, "tensor '", key, "' is on ", device_str(value.device()),
                "; only CPU tensors can be saved");
    }
    dense.push_back(value.detach().contiguous());
  }
  // Widest dtype first: every tensor then starts at a multiple of its element
  // size, so readers that map the file can use the data in place.
  std::vector<size_t> order(dense.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return dtype_size(dense[a].dtype()) > dtype_size(dense[b].dtype());
  });
  std::vector<std::pair<uint64_t, uint64_t>> offsets(dense.size());
  uint64_t cursor = 0;
  for (size_t index : order) {
    const uint64_t bytes =
        static_cast<uint64_t>(dense[index].numel()) * dtype_size(dense[index].dtype());
    offsets[index] = {cursor, cursor + bytes};
    cursor += bytes;
  }

  Json header = Json::object();
  if (!metadata.empty()) header[kMetadataKey] = metadata;
  size_t position = 0;
  for (const auto& [key, value] : tensors) {
    const Tensor& tensor = dense[position];
    header[key] = {{"dtype", safetensors_name(tensor.dtype())},
                   {"shape", tensor.shape()},
                   {"data_offsets", {offsets[position].first, offsets[position].second}}};
    ++position;
  }
  std::string text;
  try {
    text = header.dump();
  } catch (const Json::exception& error) {
    fail_save(path, "tensor names and metadata must be valid UTF-8: ", error.what());
  }
  // Pad with spaces so the data buffer starts 8-byte aligned.
  text.append((8 - text.size() % 8) % 8, ' ');
  if (text.size() > kMaxHeaderSize) {
    fail_save(path, "the header would be ", text.size(), " bytes; readers accept at most ",
              kMaxHeaderSize);
  }
  const uint64_t header_size = text.size();

  AtomicFileWriter writer(path, "save_safetensors");
  writer.write(&header_size, sizeof(header_size));
  writer.write(text.data(), text.size());
  for (size_t index : order) {
    writer.write(dense[index].raw_data(), offsets[index].second - offsets[index].first);
  }
  writer.commit();
}

}  // namespace tessera::io
