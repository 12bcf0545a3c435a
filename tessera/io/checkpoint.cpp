#include "tessera/io/checkpoint.h"

#include <charconv>
#include <map>

#include "tessera/core/error.h"
#include "tessera/io/safetensors.h"

namespace tessera::io {

namespace {

constexpr const char* kFormat = "tessera-checkpoint";
constexpr const char* kVersion = "1";
constexpr const char* kModelPrefix = "model.";
constexpr const char* kOptimizerPrefix = "optimizer.";
constexpr const char* kSchedulerPrefix = "scheduler.";

// Parses all of `text` as an integer of type T (no sign for unsigned, no
// spaces, no trailing characters); throws naming the file and the field.
template <typename T>
T parse_integer(const std::map<std::string, std::string>& metadata, const std::string& field,
                const std::string& path) {
  const std::string& text = metadata.at(field);
  T value{};
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  TESSERA_CHECK(error == std::errc() && end == text.data() + text.size() && !text.empty(),
                "[load_checkpoint] '", path, "': metadata '", field, "' is \"", text,
                "\"; expected an integer that fits in ", sizeof(T) * 8, " bits");
  return value;
}

bool starts_with(const std::string& text, const std::string& prefix) {
  return text.compare(0, prefix.size(), prefix) == 0;
}

}  // namespace

void save_checkpoint(const std::string& path, const Checkpoint& checkpoint) {
  StateDict tensors;
  tensors.merge(checkpoint.model, kModelPrefix);
  tensors.merge(checkpoint.optimizer, kOptimizerPrefix);
  tensors.merge(checkpoint.scheduler, kSchedulerPrefix);
  std::map<std::string, std::string> metadata{
      {"format", kFormat}, {"version", kVersion}, {"step", std::to_string(checkpoint.step)}};
  if (checkpoint.rng) {
    metadata["rng_seed"] = std::to_string(checkpoint.rng->first);
    metadata["rng_offset"] = std::to_string(checkpoint.rng->second);
  }
  save_safetensors(path, tensors, metadata);
}

Checkpoint load_checkpoint(const std::string& path) {
  SafetensorsFile file = load_safetensors(path);
  const auto& metadata = file.metadata;
  const auto format = metadata.find("format");
  TESSERA_CHECK(format != metadata.end() && format->second == kFormat, "[load_checkpoint] '", path,
                "' is not a Tessera checkpoint: metadata 'format' is ",
                format == metadata.end() ? "missing" : "\"" + format->second + "\"",
                "; expected \"", kFormat, "\" (use load_safetensors for plain tensor files)");
  const auto version = metadata.find("version");
  TESSERA_CHECK(version != metadata.end() && version->second == kVersion, "[load_checkpoint] '",
                path, "': checkpoint version ",
                version == metadata.end() ? "missing" : "\"" + version->second + "\"",
                " is not supported; this build reads version \"", kVersion, "\"");
  TESSERA_CHECK(metadata.count("step") != 0, "[load_checkpoint] '", path,
                "': metadata 'step' is missing");

  Checkpoint checkpoint;
  checkpoint.step = parse_integer<int64_t>(metadata, "step", path);
  const bool has_seed = metadata.count("rng_seed") != 0;
  const bool has_offset = metadata.count("rng_offset") != 0;
  TESSERA_CHECK(has_seed == has_offset, "[load_checkpoint] '", path, "': metadata has ",
                has_seed ? "'rng_seed' without 'rng_offset'" : "'rng_offset' without 'rng_seed'",
                "; both or neither are expected");
  if (has_seed) {
    checkpoint.rng = {{parse_integer<uint64_t>(metadata, "rng_seed", path),
                       parse_integer<uint64_t>(metadata, "rng_offset", path)}};
  }
  for (const auto& [key, value] : file.tensors) {
    if (starts_with(key, kModelPrefix)) {
      checkpoint.model.insert(key.substr(std::string(kModelPrefix).size()), value);
    } else if (starts_with(key, kOptimizerPrefix)) {
      checkpoint.optimizer.insert(key.substr(std::string(kOptimizerPrefix).size()), value);
    } else if (starts_with(key, kSchedulerPrefix)) {
      checkpoint.scheduler.insert(key.substr(std::string(kSchedulerPrefix).size()), value);
    } else {
      TESSERA_FAIL("[load_checkpoint] '", path, "': tensor '", key, "' starts with none of '",
                   kModelPrefix, "', '", kOptimizerPrefix, "' and '", kSchedulerPrefix, "'");
    }
  }
  return checkpoint;
}

}  // namespace tessera::io
