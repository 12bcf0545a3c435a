// libFuzzer target for the safetensors reader: any byte string must either
// parse or throw tessera::Error, never crash, hang, leak or read out of bounds.
//
// Build the library with clang, sanitizers and coverage, then link this file:
//   cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_COMPILER=clang++ \
//         -DTESSERA_SANITIZE=ON -DCMAKE_CXX_FLAGS=-fsanitize=fuzzer-no-link \
//         -DTESSERA_BUILD_TESTS=OFF -DTESSERA_BUILD_BENCH=OFF -DTESSERA_BUILD_EXAMPLES=OFF
//   cmake --build build-fuzz --target tessera
//   clang++ -std=c++20 -g -O1 -fsanitize=fuzzer,address,undefined -I. \
//         fuzz/safetensors_fuzz.cpp -Lbuild-fuzz -ltessera -Wl,-rpath,$PWD/build-fuzz \
//         -o build-fuzz/safetensors_fuzz
// Run (seeds: fuzz/corpus/safetensors; tokens: fuzz/safetensors.dict); longer
// runs just raise -max_total_time, or drop it to run until a crash:
//   mkdir -p build-fuzz/corpus && build-fuzz/safetensors_fuzz build-fuzz/corpus \
//         fuzz/corpus/safetensors -dict=fuzz/safetensors.dict -max_total_time=60
#include <cstddef>
#include <cstdint>

#include "tessera/core/error.h"
#include "tessera/io/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    tessera::io::parse_safetensors(data, size, "fuzz input");
  } catch (const tessera::Error&) {
    // Rejecting malformed input with a message is the expected outcome.
  }
  return 0;
}
