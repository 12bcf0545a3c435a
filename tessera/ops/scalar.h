#pragma once

#include <cstdint>
#include <type_traits>

#include "tessera/core/dtype.h"

namespace tessera {

// A number passed where a tensor could be (x + 2, clamp(x, 0.0, 1.0)).
// Remembers whether it was written as an integer, for type promotion, and
// keeps an integer exactly (a double holds integers only up to 2^53).
class Scalar {
 public:
  template <typename T, typename = std::enable_if_t<std::is_arithmetic_v<T>>>
  Scalar(T value)  // NOLINT: implicit on purpose, like torch's Scalar
      : value_(static_cast<double>(value)),
        int_value_(exact_integer(value)),
        integral_(std::is_integral_v<T> && !std::is_same_v<T, bool>),
        boolean_(std::is_same_v<T, bool>) {}

  double to_double() const { return value_; }
  // The integer value, exact; only meaningful when is_integral() or is_bool().
  int64_t to_int64() const { return int_value_; }
  bool is_integral() const { return integral_; }
  bool is_bool() const { return boolean_; }
  // The value as integer kernels take it: a floating value truncated
  // towards zero (PyTorch's addmm on i64 with alpha=0.6 multiplies by 0).
  Scalar truncated() const {
    return integral_ || boolean_ ? *this : Scalar(static_cast<int64_t>(value_));
  }
  // The dtype a tensor `other` gets when combined with this scalar.
  DType result_dtype(DType other) const {
    if (is_floating(other)) return other;
    if (integral_) return other == DType::boolean ? DType::i64 : other;
    if (boolean_) return other;
    return DType::f32;
  }

 private:
  template <typename T>
  static int64_t exact_integer(T value) {
    if constexpr (std::is_integral_v<T>) {
      return static_cast<int64_t>(value);  // a uint64_t above INT64_MAX wraps, as in PyTorch
    } else {
      return 0;
    }
  }

  double value_;
  int64_t int_value_;
  bool integral_;
  bool boolean_;
};

}  // namespace tessera
