#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>

#include "tessera/core/state_dict.h"

namespace tessera::io {

// The contents of a safetensors file: named tensors (in the file's header
// order) and the optional "__metadata__" string map.
struct SafetensorsFile {
  StateDict tensors;
  std::map<std::string, std::string> metadata;
};

// Writes `tensors` (CPU; non-contiguous ones are made contiguous) and
// `metadata` as a safetensors file, atomically: a failure leaves the previous
// file, if any, untouched and no partial file behind. The header lists the
// tensors in StateDict order; data is laid out widest dtype first so every
// tensor is aligned to its element size. Throws naming the path and errno text.
void save_safetensors(const std::string& path, const StateDict& tensors,
                      const std::map<std::string, std::string>& metadata = {});

// Reads a safetensors file (F64, F32, F16, BF16, I64, I32, U8, BOOL). Every
// field is validated; a malformed file throws an error naming the file and key.
SafetensorsFile load_safetensors(const std::string& path);

// Parses safetensors bytes already in memory; `name` labels error messages.
SafetensorsFile parse_safetensors(const uint8_t* data, size_t size, const std::string& name);

}  // namespace tessera::io
