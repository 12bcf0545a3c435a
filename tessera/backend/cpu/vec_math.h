#pragma once

// Scalar float math written so that GCC vectorises loops calling it (no
// library calls, branch-free). Accuracy is a few ulp for exp/tanh/sigmoid;
// erf has an absolute error below 2e-7. Double paths use <cmath>.

#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

namespace tessera::cpu {

// Integer arithmetic that wraps modulo 2^bits, as PyTorch's kernels do, but
// computed in the unsigned type so that signed overflow is not undefined
// behaviour (the cast back is modular since C++20). Floating T is unchanged.
template <typename T, bool = std::is_integral_v<T>>
struct Wrap {
  using type = T;
};
template <typename T>
struct Wrap<T, true> {
  using type = std::make_unsigned_t<T>;
};
template <typename T>
using WrapType = typename Wrap<T>::type;
template <typename T>
T wrapping_add(T a, T b) {
  return static_cast<T>(static_cast<WrapType<T>>(a) + static_cast<WrapType<T>>(b));
}
template <typename T>
T wrapping_sub(T a, T b) {
  return static_cast<T>(static_cast<WrapType<T>>(a) - static_cast<WrapType<T>>(b));
}
template <typename T>
T wrapping_mul(T a, T b) {
  // uint8/uint16 promote to int before multiplying; go through unsigned int
  // so that the product cannot overflow int either.
  using Wide = std::conditional_t<std::is_integral_v<T> && sizeof(T) < sizeof(unsigned), unsigned,
                                  WrapType<T>>;
  return static_cast<T>(static_cast<Wide>(static_cast<WrapType<T>>(a)) *
                        static_cast<Wide>(static_cast<WrapType<T>>(b)));
}
template <typename T>
T wrapping_neg(T x) {
  return wrapping_sub(T(0), x);
}

inline float bit_float(int32_t bits) {
  float value;
  std::memcpy(&value, &bits, sizeof(value));
  return value;
}

inline float fast_exp(float x) {
  const float clamped = x < -87.3f ? -87.3f : (x > 88.7f ? 88.7f : x);
  // Round to nearest by the 1.5 * 2^23 trick: vectorises without libm.
  const float n = (clamped * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
  float r = clamped - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  const float scale = bit_float((static_cast<int32_t>(n) + 127) << 23);
  float result = p * scale;
  result = x < -87.3f ? 0.0f : result;
  result = x > 88.7f ? __builtin_inff() : result;
  return x != x ? x : result;
}

inline float fast_tanh(float x) {
  const float ax = x < 0 ? -x : x;
  // Small |x|: odd polynomial; otherwise 1 - 2 / (exp(2|x|) + 1).
  const float z = x * x;
  float small = -5.70498872745e-3f;
  small = small * z + 2.06390887954e-2f;
  small = small * z - 5.37397155531e-2f;
  small = small * z + 1.33314422036e-1f;
  small = small * z - 3.33332819422e-1f;
  small = small * z * x + x;
  const float e = fast_exp(2.0f * (ax > 9.0f ? 9.0f : ax));
  float large = 1.0f - 2.0f / (e + 1.0f);
  large = x < 0 ? -large : large;
  return ax < 0.625f ? small : large;
}

inline float fast_sigmoid(float x) { return 1.0f / (1.0f + fast_exp(-x)); }

inline float fast_erf(float x) {
  // Abramowitz & Stegun 7.1.26 with the odd symmetry; a Taylor series near 0
  // keeps the relative error small for tiny |x|.
  const float ax = x < 0 ? -x : x;
  const float t = 1.0f / (1.0f + 0.3275911f * ax);
  float poly = 1.061405429f;
  poly = poly * t - 1.453152027f;
  poly = poly * t + 1.421413741f;
  poly = poly * t - 0.284496736f;
  poly = poly * t + 0.254829592f;
  float far = 1.0f - poly * t * fast_exp(-ax * ax);
  far = x < 0 ? -far : far;
  const float z = x * x;
  const float near = x * (1.1283791671f + z * (-0.3761263890f + z * (0.1128379167f +
                                                                     z * -0.0268661706f)));
  return ax < 0.25f ? near : far;
}

}  // namespace tessera::cpu
