#include "tessera/core/sbp.h"

namespace tessera {

std::string sbp_str(const Sbp& sbp) {
  switch (sbp.kind) {
    case SbpKind::split: return "S(" + std::to_string(sbp.axis) + ")";
    case SbpKind::broadcast: return "B";
    case SbpKind::partial_sum: return "P(sum)";
    case SbpKind::partial_max: return "P(max)";
    case SbpKind::partial_min: return "P(min)";
  }
  return "?";
}

std::string signature_str(const SbpSignature& signature) {
  auto join = [](const std::vector<Sbp>& list) {
    std::string text;
    for (size_t i = 0; i < list.size(); ++i) {
      if (i) text += ", ";
      text += sbp_str(list[i]);
    }
    return text;
  };
  std::string text = "(";
  text += join(signature.inputs);
  text += ") -> ";
  text += join(signature.outputs);
  return text;
}

}  // namespace tessera
