#include "tessera/core/dtype.h"

#include "tessera/core/error.h"

namespace tessera {

const char* dtype_name(DType dtype) {
  switch (dtype) {
    case DType::f32: return "f32";
    case DType::f64: return "f64";
    case DType::bf16: return "bf16";
    case DType::f16: return "f16";
    case DType::i64: return "i64";
    case DType::i32: return "i32";
    case DType::u8: return "u8";
    case DType::boolean: return "bool";
  }
  return "?";
}

DType dtype_from_name(const std::string& name) {
  for (int i = 0; i < kNumDTypes; ++i) {
    auto dtype = static_cast<DType>(i);
    if (name == dtype_name(dtype)) return dtype;
  }
  TESSERA_FAIL("[dtype] unknown dtype '", name, "'; valid: f32, f64, bf16, f16, i64, i32, u8, bool");
}

bool is_floating(DType dtype) {
  return dtype == DType::f32 || dtype == DType::f64 || dtype == DType::bf16 || dtype == DType::f16;
}

bool is_integral(DType dtype) {
  return dtype == DType::i64 || dtype == DType::i32 || dtype == DType::u8;
}

namespace {
// Rank within a category; the wider type of the higher category wins.
int category(DType dtype) { return is_floating(dtype) ? 2 : (is_integral(dtype) ? 1 : 0); }
int width_rank(DType dtype) {
  switch (dtype) {
    case DType::boolean: return 0;
    case DType::u8: return 1;
    case DType::i32: return 2;
    case DType::i64: return 3;
    case DType::f16: return 1;
    case DType::bf16: return 1;
    case DType::f32: return 2;
    case DType::f64: return 3;
  }
  return 0;
}
}  // namespace

DType promote_types(DType a, DType b) {
  if (a == b) return a;
  if (category(a) != category(b)) return category(a) > category(b) ? a : b;
  if ((a == DType::f16 && b == DType::bf16) || (a == DType::bf16 && b == DType::f16)) {
    return DType::f32;
  }
  return width_rank(a) >= width_rank(b) ? a : b;
}

Half::Half(float value) {
  uint32_t raw;
  std::memcpy(&raw, &value, sizeof(raw));
  uint32_t sign = (raw >> 16) & 0x8000u;
  uint32_t magnitude = raw & 0x7fffffffu;
  if (magnitude > 0x7f800000u) {
    bits = static_cast<uint16_t>(sign | 0x7e00u);
    return;
  }
  if (magnitude >= 0x47800000u) {  // overflow to infinity
    bits = static_cast<uint16_t>(sign | 0x7c00u);
    return;
  }
  if (magnitude < 0x38800000u) {  // subnormal or zero in half
    float abs_value;
    std::memcpy(&abs_value, &magnitude, sizeof(abs_value));
    // Scale so the subnormal unit becomes 1, then round to nearest even.
    float scaled = abs_value * 16777216.0f;  // 2^24
    uint32_t units = static_cast<uint32_t>(scaled);
    float remainder = scaled - static_cast<float>(units);
    if (remainder > 0.5f || (remainder == 0.5f && (units & 1u))) ++units;
    bits = static_cast<uint16_t>(sign | units);
    return;
  }
  uint32_t exponent = ((magnitude >> 23) - 112u) << 10;
  uint32_t mantissa = (magnitude >> 13) & 0x3ffu;
  uint32_t result = exponent | mantissa;
  uint32_t rest = magnitude & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (result & 1u))) ++result;
  bits = static_cast<uint16_t>(sign | result);
}

Half::operator float() const {
  uint32_t sign = static_cast<uint32_t>(bits & 0x8000u) << 16;
  uint32_t exponent = (bits >> 10) & 0x1fu;
  uint32_t mantissa = bits & 0x3ffu;
  uint32_t raw;
  if (exponent == 0) {
    float value = static_cast<float>(mantissa) / 16777216.0f;
    return sign ? -value : value;
  } else if (exponent == 31) {
    raw = sign | 0x7f800000u | (mantissa << 13);
  } else {
    raw = sign | ((exponent + 112u) << 23) | (mantissa << 13);
  }
  float value;
  std::memcpy(&value, &raw, sizeof(value));
  return value;
}

}  // namespace tessera
