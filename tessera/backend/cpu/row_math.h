#pragma once

// Per-row building blocks shared by the softmax, normalisation and loss
// kernels: maxima, sums and shifted exponentials over contiguous runs,
// written so that GCC vectorises them under the project's default flags.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

namespace tessera::cpu::rows {

// Reductions run on GCC vector types of one AVX register, two accumulators
// per loop to hide latency: the loop vectoriser does not vectorise FP
// reductions without reassociation, and its SLP fallback for hand-unrolled
// lanes is unreliable (16 f32 max lanes stay scalar, 32 vectorise).
template <typename T>
using Pack [[gnu::vector_size(32)]] = T;
template <typename T>
constexpr int64_t kWidth = 32 / sizeof(T);
// f32 partial sums are flushed into a double every block, bounding the error
// growth on long rows; it is also the scratch size for exponentials.
constexpr int64_t kBlock = 1024;

template <typename T>
inline Pack<T> load(const T* p) {
  Pack<T> v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

template <typename T>
inline Pack<T> splat(T value) {
  Pack<T> v;
  for (int64_t l = 0; l < kWidth<T>; ++l) v[l] = value;
  return v;
}

inline int32_t float_bits(float value) {
  int32_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  return bits;
}

inline float bits_float(int32_t bits) {
  float value;
  std::memcpy(&value, &bits, sizeof(value));
  return value;
}

// take ? replacement : value, through integer masks. A floating select whose
// arm is computed is kept as a branch under -ftrapping-math (GCC's default),
// which stops vectorisation; integer blends have no such restriction.
inline float select(bool take, float replacement, float value) {
  const int32_t mask = -static_cast<int32_t>(take);
  return bits_float((float_bits(value) & ~mask) | (float_bits(replacement) & mask));
}

// exp(x) for x <= 0 (values minus their row maximum) or NaN: f32 with a
// relative error below 1e-7 and exactly 0 below -87.3 (so -inf gives 0).
// The polynomial of vec_math.h's fast_exp, restructured to vectorise under
// GCC's default -ftrapping-math, which keeps a floating select with a
// computed arm as a branch: selects are integer masks, rounding is the
// 1.5 * 2^23 trick (no float-to-int conversion, so a NaN input just yields
// NaN), and without the overflow handling positive arguments would need.
inline float exp_nonpositive(float x) {
  constexpr float kRound = 12582912.0f;
  const float c = select(x < -87.3f, -87.3f, x);
  const float rounded = c * 1.44269504088896341f + kRound;
  const float n = rounded - kRound;
  float r = c - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  const float scale = bits_float((float_bits(rounded) - float_bits(kRound) + 127) << 23);
  return select(x < -87.3f, 0.0f, p * scale);
}
inline double exp_nonpositive(double x) {
  return std::exp(x);
}

template <typename T>
T horizontal_max(Pack<T> v) {
  T result = v[0];
  for (int64_t l = 1; l < kWidth<T>; ++l) result = v[l] > result ? v[l] : result;
  return result;
}

template <typename T>
T horizontal_sum(Pack<T> v) {
  T result = 0;
  for (int64_t l = 0; l < kWidth<T>; ++l) result += v[l];
  return result;
}

// Largest element of x[0..n); NaNs are skipped (they propagate through the
// exponentials instead). -inf for n == 0.
template <typename T>
T max(const T* __restrict x, int64_t n) {
  constexpr int64_t w = kWidth<T>;
  Pack<T> a = splat(-std::numeric_limits<T>::infinity()), b = a;
  int64_t i = 0;
  for (; i + 2 * w <= n; i += 2 * w) {
    const Pack<T> u = load(x + i), v = load(x + i + w);
    a = u > a ? u : a;
    b = v > b ? v : b;
  }
  a = b > a ? b : a;
  T result = horizontal_max<T>(a);
  for (; i < n; ++i) result = x[i] > result ? x[i] : result;
  return result;
}

// Sum of x[0..n) in T precision, for n up to a few thousand.
template <typename T>
T lane_sum(const T* __restrict x, int64_t n) {
  constexpr int64_t w = kWidth<T>;
  Pack<T> a = splat(T(0)), b = a;
  int64_t i = 0;
  for (; i + 2 * w <= n; i += 2 * w) {
    a += load(x + i);
    b += load(x + i + w);
  }
  T total = horizontal_sum<T>(a + b);
  for (; i < n; ++i) total += x[i];
  return total;
}

// Sum of x[0..n) accumulated per block in double.
template <typename T>
double sum(const T* __restrict x, int64_t n) {
  double total = 0;
  for (int64_t block = 0; block < n; block += kBlock) {
    total += lane_sum(x + block, std::min(kBlock, n - block));
  }
  return total;
}

// Sum of a[i] * b[i] over [0, n), accumulated per block in double.
template <typename T>
double dot(const T* __restrict a, const T* __restrict b, int64_t n) {
  constexpr int64_t w = kWidth<T>;
  double total = 0;
  for (int64_t block = 0; block < n; block += kBlock) {
    const int64_t end = std::min(n, block + kBlock);
    Pack<T> u = splat(T(0)), v = u;
    int64_t i = block;
    for (; i + 2 * w <= end; i += 2 * w) {
      u += load(a + i) * load(b + i);
      v += load(a + i + w) * load(b + i + w);
    }
    T partial = horizontal_sum<T>(u + v);
    for (; i < end; ++i) partial += a[i] * b[i];
    total += partial;
  }
  return total;
}

// Sum of (x - center)^2 over x[0..n), accumulated per block in double.
template <typename T>
double squared_deviation(const T* __restrict x, int64_t n, T center) {
  constexpr int64_t w = kWidth<T>;
  const Pack<T> c = splat(center);
  double total = 0;
  for (int64_t block = 0; block < n; block += kBlock) {
    const int64_t end = std::min(n, block + kBlock);
    Pack<T> a = splat(T(0)), b = a;
    int64_t i = block;
    for (; i + 2 * w <= end; i += 2 * w) {
      const Pack<T> u = load(x + i) - c, v = load(x + i + w) - c;
      a += u * u;
      b += v * v;
    }
    T partial = horizontal_sum<T>(a + b);
    for (; i < end; ++i) partial += (x[i] - center) * (x[i] - center);
    total += partial;
  }
  return total;
}

// sum(exp(x - shift)) over x[0..n), where shift >= every x (the row
// maximum). With Store the exponentials are written to y; otherwise y is
// ignored. Exponentiating and summing are separate loops over an
// L1-resident block so that both vectorise.
template <typename T, bool Store>
double exp_sum(const T* __restrict x, T* __restrict y, int64_t n, T shift) {
  double total = 0;
  T scratch[kBlock];
  for (int64_t block = 0; block < n; block += kBlock) {
    const int64_t count = std::min(kBlock, n - block);
    T* __restrict out = scratch;
    if constexpr (Store) out = y + block;
    const T* __restrict in = x + block;
    for (int64_t i = 0; i < count; ++i) out[i] = exp_nonpositive(in[i] - shift);
    total += lane_sum(out, count);
  }
  return total;
}

}  // namespace tessera::cpu::rows
