#pragma once

#include <cstdint>
#include <type_traits>

#include "tessera/core/dtype.h"

namespace tessera {

// A number passed where a tensor could be (x + 2, clamp(x, 0.0, 1.0)).
// Remembers whether it was written as an integer, for type promotion.
class Scalar {
 public:
  template <typename T, typename = std::enable_if_t<std::is_arithmetic_v<T>>>
  Scalar(T value)  // NOLINT: implicit on purpose, like torch's Scalar
      : value_(static_cast<double>(value)),
        integral_(std::is_integral_v<T> && !std::is_same_v<T, bool>),
        boolean_(std::is_same_v<T, bool>) {}

  double to_double() const { return value_; }
  bool is_integral() const { return integral_; }
  bool is_bool() const { return boolean_; }
  // The dtype a tensor `other` gets when combined with this scalar.
  DType result_dtype(DType other) const {
    if (is_floating(other)) return other;
    if (integral_) return other == DType::boolean ? DType::i64 : other;
    if (boolean_) return other;
    return DType::f32;
  }

 private:
  double value_;
  bool integral_;
  bool boolean_;
};

}  // namespace tessera
