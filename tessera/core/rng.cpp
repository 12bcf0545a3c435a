#include "tessera/core/rng.h"

namespace tessera {

std::array<uint32_t, 4> Philox::block(uint64_t seed, uint64_t offset, uint64_t index) {
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

Generator& default_generator() {
  static Generator generator(0);
  return generator;
}

void manual_seed(uint64_t seed) { default_generator().manual_seed(seed); }

}  // namespace tessera
