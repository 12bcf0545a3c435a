#pragma once

#include <array>
#include <cstdint>

namespace tessera {

// Philox4x32-10 counter-based generator. A (seed, offset) pair fully
// determines the stream, so element i of a random tensor depends only on
// (seed, offset, i): the same logical values on any number of shards.
class Philox {
 public:
  // Four 32-bit random words for counter `index` of the stream (seed, offset).
  static std::array<uint32_t, 4> block(uint64_t seed, uint64_t offset, uint64_t index);
  // Uniform float in [0, 1) from a 32-bit word.
  static float to_unit_float(uint32_t word) { return (word >> 8) * (1.0f / 16777216.0f); }
  static double to_unit_double(uint32_t high, uint32_t low) {
    uint64_t bits = (static_cast<uint64_t>(high) << 21) ^ low;
    return static_cast<double>(bits & ((uint64_t{1} << 53) - 1)) * (1.0 / 9007199254740992.0);
  }
};

// The default generator: a seed plus an offset that every random op advances
// by the number of counters it consumed.
class Generator {
 public:
  explicit Generator(uint64_t seed = 0) : seed_(seed) {}
  void manual_seed(uint64_t seed) {
    seed_ = seed;
    offset_ = 0;
  }
  uint64_t seed() const { return seed_; }
  uint64_t offset() const { return offset_; }
  void set_state(uint64_t seed, uint64_t offset) {
    seed_ = seed;
    offset_ = offset;
  }
  // Reserves `count` counters and returns the offset where they start.
  uint64_t reserve(uint64_t count) {
    uint64_t start = offset_;
    offset_ += count;
    return start;
  }

 private:
  uint64_t seed_;
  uint64_t offset_ = 0;
};

Generator& default_generator();
// Seeds the default generator (like torch.manual_seed).
void manual_seed(uint64_t seed);

}  // namespace tessera
