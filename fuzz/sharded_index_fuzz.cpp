// libFuzzer target for the sharded-checkpoint index: any text must either
// parse into an index whose pieces lie inside their tensors and name files
// of the folder, or throw tessera::Error; never crash, hang or leak.
// Built and run by scripts/fuzz.sh (seeds: fuzz/corpus/sharded_index).
#include <cstddef>
#include <cstdint>
#include <string>

#include "tessera/core/error.h"
#include "tessera/global/sharded_index.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const auto index = tessera::global::parse_sharded_index(
        std::string(reinterpret_cast<const char*>(data), size), "fuzz input");
    for (const auto& [key, entry] : index.tensors) {
      for (const auto& piece : entry.pieces) {
        for (size_t d = 0; d < entry.shape.size(); ++d) {
          if (piece.start[d] < 0 || piece.size[d] < 0 ||
              piece.start[d] > entry.shape[d] - piece.size[d]) {
            __builtin_trap();  // a piece outside its tensor passed validation
          }
        }
        if (piece.file.find('/') != std::string::npos) __builtin_trap();
      }
    }
  } catch (const tessera::Error&) {
    // Rejecting malformed input with a message is the expected outcome.
  }
  return 0;
}
