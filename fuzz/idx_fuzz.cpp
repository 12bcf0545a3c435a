// libFuzzer target for the IDX reader (tessera/data/idx.cpp): any byte
// string, plain or gzip, must either parse or throw tessera::Error; a crash,
// a sanitizer report, a leak, another exception type or a huge allocation
// is a bug.
//
// Build and run with scripts/fuzz.sh (clang, libFuzzer, ASan + UBSan):
//   bash scripts/fuzz.sh                            # 60 s
//   TESSERA_FUZZ_SECONDS=3600 bash scripts/fuzz.sh  # an hour
//   bash scripts/fuzz.sh -jobs=4 -workers=4         # extra args go to libFuzzer
// The corpus grows in build-fuzz/idx_corpus across runs; a crashing input is
// saved as build-fuzz/crash-* and can be replayed with
//   build-fuzz/idx_fuzz build-fuzz/crash-<hash>
#include <cstddef>
#include <cstdint>

#include "tessera/core/error.h"
#include "tessera/data/idx.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    tessera::Tensor tensor = tessera::data::parse_idx(data, size, "fuzz input");
    // Read every byte back so a bad shape or short allocation shows up under ASan.
    const auto* bytes = static_cast<const volatile uint8_t*>(tensor.raw_data());
    const size_t count = static_cast<size_t>(tensor.numel()) * tessera::dtype_size(tensor.dtype());
    uint8_t sum = 0;
    for (size_t i = 0; i < count; ++i) sum = static_cast<uint8_t>(sum + bytes[i]);
    (void)sum;
  } catch (const tessera::Error&) {
    // Rejected input: the expected outcome for most of them.
  }
  return 0;
}
