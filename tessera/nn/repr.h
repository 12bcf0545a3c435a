#pragma once

// Helpers for modules' extra_repr, which print arguments as PyTorch's
// Python reprs do.

#include <charconv>
#include <string>

namespace tessera::nn {

// A double as Python's repr writes a float: 1.0, 0.01, -1e-05.
inline std::string py_float(double value) {
  char buffer[64];
  auto [end, error] = std::to_chars(buffer, buffer + sizeof(buffer), value);
  std::string text(buffer, end);
  if (text.find_first_of(".en") == std::string::npos) text += ".0";
  return text;
}

}  // namespace tessera::nn
