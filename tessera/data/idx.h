#pragma once

// Reader for the IDX format of MNIST-style datasets: two zero bytes, a type
// byte, a dim count, big-endian u32 dims, then the elements (big-endian).
// Files may be gzip-compressed (detected by their 1f 8b magic).
//
// Element types map to Tessera dtypes without loss: u8 (0x08) -> u8,
// i8 (0x09) and i16 (0x0B) -> i32, i32 (0x0C) -> i32, f32 (0x0D) -> f32,
// f64 (0x0E) -> f64.

#include <cstddef>
#include <cstdint>
#include <string>

#include "tessera/core/tensor.h"

namespace tessera::data {

// Largest decompressed size accepted; anything larger is treated as hostile.
constexpr uint64_t kMaxIdxBytes = uint64_t{4} << 30;

// Reads an IDX file (plain or gzip) into a tensor of the declared shape.
// Errors name the file and what was expected.
Tensor read_idx(const std::string& path);
// Parses an IDX image held in memory (plain or gzip); `name` labels errors.
// Validates every size against the bytes present before allocating.
Tensor parse_idx(const uint8_t* data, size_t size, const std::string& name);

}  // namespace tessera::data
