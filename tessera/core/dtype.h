#pragma once

#include <cstdint>
#include <cstring>
#include <string>

namespace tessera {

enum class DType : uint8_t { f32, f64, bf16, f16, i64, i32, u8, boolean };

constexpr int kNumDTypes = 8;

// Size of one element in bytes.
constexpr size_t dtype_size(DType dtype) {
  switch (dtype) {
    case DType::f32:
      return 4;
    case DType::f64:
      return 8;
    case DType::bf16:
      return 2;
    case DType::f16:
      return 2;
    case DType::i64:
      return 8;
    case DType::i32:
      return 4;
    case DType::u8:
      return 1;
    case DType::boolean:
      return 1;
  }
  return 0;
}
// Short name used in messages and files: "f32", "bool", ...
const char* dtype_name(DType dtype);
// Parses the names produced by dtype_name; throws on anything else.
DType dtype_from_name(const std::string& name);
bool is_floating(DType dtype);
bool is_integral(DType dtype);  // bool excluded
// Result dtype of a binary op, PyTorch-style: bool < integers < floats, wider wins.
DType promote_types(DType a, DType b);

// 16-bit floating point storage types. Arithmetic happens in f32.
struct BFloat16 {
  uint16_t bits = 0;
  BFloat16() = default;
  explicit BFloat16(float value) {
    uint32_t raw;
    std::memcpy(&raw, &value, sizeof(raw));
    if ((raw & 0x7fffffffu) > 0x7f800000u) {
      bits = 0x7fc0;  // quiet NaN
      return;
    }
    raw += 0x7fffu + ((raw >> 16) & 1u);  // round to nearest even
    bits = static_cast<uint16_t>(raw >> 16);
  }
  operator float() const {
    uint32_t raw = static_cast<uint32_t>(bits) << 16;
    float value;
    std::memcpy(&value, &raw, sizeof(value));
    return value;
  }
};

struct Half {
  uint16_t bits = 0;
  Half() = default;
  explicit Half(float value);
  operator float() const;
};

template <typename T>
struct DTypeOf;
template <> struct DTypeOf<float> { static constexpr DType value = DType::f32; };
template <> struct DTypeOf<double> { static constexpr DType value = DType::f64; };
template <> struct DTypeOf<BFloat16> { static constexpr DType value = DType::bf16; };
template <> struct DTypeOf<Half> { static constexpr DType value = DType::f16; };
template <> struct DTypeOf<int64_t> { static constexpr DType value = DType::i64; };
template <> struct DTypeOf<int32_t> { static constexpr DType value = DType::i32; };
template <> struct DTypeOf<uint8_t> { static constexpr DType value = DType::u8; };
template <> struct DTypeOf<bool> { static constexpr DType value = DType::boolean; };

}  // namespace tessera

// Calls body with `scalar_t` bound to the C++ type of dtype. The variants
// restrict the set; an unlisted dtype throws naming the op.
#define TESSERA_DTYPE_CASE(enum_value, type, ...) \
  case ::tessera::DType::enum_value: {            \
    using scalar_t = type;                        \
    __VA_ARGS__();                                \
    break;                                        \
  }

#define TESSERA_DISPATCH_FLOATING(dtype, op_name, ...)                                   \
  switch (dtype) {                                                                     \
    TESSERA_DTYPE_CASE(f32, float, __VA_ARGS__)                                          \
    TESSERA_DTYPE_CASE(f64, double, __VA_ARGS__)                                         \
    default:                                                                           \
      TESSERA_FAIL("[", op_name, "] no CPU kernel for dtype ", ::tessera::dtype_name(dtype), \
                   "; supported: f32, f64");                                           \
  }

#define TESSERA_DISPATCH_NUMERIC(dtype, op_name, ...)                                    \
  switch (dtype) {                                                                     \
    TESSERA_DTYPE_CASE(f32, float, __VA_ARGS__)                                          \
    TESSERA_DTYPE_CASE(f64, double, __VA_ARGS__)                                         \
    TESSERA_DTYPE_CASE(i64, int64_t, __VA_ARGS__)                                        \
    TESSERA_DTYPE_CASE(i32, int32_t, __VA_ARGS__)                                        \
    TESSERA_DTYPE_CASE(u8, uint8_t, __VA_ARGS__)                                         \
    default:                                                                           \
      TESSERA_FAIL("[", op_name, "] no CPU kernel for dtype ", ::tessera::dtype_name(dtype), \
                   "; supported: f32, f64, i64, i32, u8");                             \
  }

#define TESSERA_DISPATCH_ALL(dtype, op_name, ...)          \
  switch (dtype) {                                       \
    TESSERA_DTYPE_CASE(f32, float, __VA_ARGS__)            \
    TESSERA_DTYPE_CASE(f64, double, __VA_ARGS__)           \
    TESSERA_DTYPE_CASE(bf16, ::tessera::BFloat16, __VA_ARGS__) \
    TESSERA_DTYPE_CASE(f16, ::tessera::Half, __VA_ARGS__)  \
    TESSERA_DTYPE_CASE(i64, int64_t, __VA_ARGS__)          \
    TESSERA_DTYPE_CASE(i32, int32_t, __VA_ARGS__)          \
    TESSERA_DTYPE_CASE(u8, uint8_t, __VA_ARGS__)           \
    TESSERA_DTYPE_CASE(boolean, bool, __VA_ARGS__)         \
  }
