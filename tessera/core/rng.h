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
  static inline std::array<uint32_t, 4> block(uint64_t seed, uint64_t offset, uint64_t index);
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

// Inline: random kernels call it once per element.
inline std::array<uint32_t, 4> Philox::block(uint64_t seed, uint64_t offset, uint64_t index) {
  constexpr uint32_t kMul0 = 0xD2511F53u, kMul1 = 0xCD9E8D57u;
  constexpr uint32_t kWeyl0 = 0x9E3779B9u, kWeyl1 = 0xBB67AE85u;
  uint32_t counter[4] = {static_cast<uint32_t>(index), static_cast<uint32_t>(index >> 32),
                         static_cast<uint32_t>(offset), static_cast<uint32_t>(offset >> 32)};
  uint32_t key[2] = {static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32)};
  for (int round = 0; round < 10; ++round) {
    uint64_t product0 = static_cast<uint64_t>(kMul0) * counter[0];
    uint64_t product1 = static_cast<uint64_t>(kMul1) * counter[2];
    uint32_t next[4] = {
        static_cast<uint32_t>(product1 >> 32) ^ counter[1] ^ key[0],
        static_cast<uint32_t>(product1),
        static_cast<uint32_t>(product0 >> 32) ^ counter[3] ^ key[1],
        static_cast<uint32_t>(product0),
    };
    for (int i = 0; i < 4; ++i) counter[i] = next[i];
    key[0] += kWeyl0;
    key[1] += kWeyl1;
  }
  return {counter[0], counter[1], counter[2], counter[3]};
}

Generator& default_generator();
// Seeds the default generator (like torch.manual_seed).
void manual_seed(uint64_t seed);

}  // namespace tessera
