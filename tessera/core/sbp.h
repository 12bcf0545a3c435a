#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tessera {

// How a logical tensor maps onto the ranks of one mesh axis:
// split along an axis, broadcast (full copy everywhere), or partial values
// whose sum/max/min over ranks is the logical tensor.
enum class SbpKind : uint8_t { split, broadcast, partial_sum, partial_max, partial_min };

struct Sbp {
  SbpKind kind = SbpKind::broadcast;
  int64_t axis = 0;  // only for split

  static Sbp split(int64_t axis) { return {SbpKind::split, axis}; }
  static Sbp broadcast() { return {SbpKind::broadcast, 0}; }
  static Sbp partial_sum() { return {SbpKind::partial_sum, 0}; }
  static Sbp partial_max() { return {SbpKind::partial_max, 0}; }
  static Sbp partial_min() { return {SbpKind::partial_min, 0}; }

  bool is_split() const { return kind == SbpKind::split; }
  bool is_broadcast() const { return kind == SbpKind::broadcast; }
  bool is_partial() const {
    return kind == SbpKind::partial_sum || kind == SbpKind::partial_max ||
           kind == SbpKind::partial_min;
  }
  bool operator==(const Sbp& other) const {
    return kind == other.kind && (kind != SbpKind::split || axis == other.axis);
  }
};

// "S(0)", "B", "P(sum)", "P(max)", "P(min)"
std::string sbp_str(const Sbp& sbp);

// One way an op can run on shards: the local kernel applied to inputs laid
// out as `inputs` yields outputs laid out as `outputs`.
struct SbpSignature {
  std::vector<Sbp> inputs;
  std::vector<Sbp> outputs;
  bool operator==(const SbpSignature&) const = default;
};

// "(S(0), B) -> S(0)"
std::string signature_str(const SbpSignature& signature);

}  // namespace tessera
