// The CPU's chain kernel (ops/tile_kernels.h): a fused program whose steps
// form one chain of simple arithmetic runs 128 elements at a time with the
// value in eight AVX-512 registers, so a step costs its instruction and no
// store. Each op is written to round, order NaNs and keep signed zeros
// exactly as its functor in elementwise.cpp does, so the chain gives the
// tile kernels' (and the unfused ops') bits.

#include <immintrin.h>

#include <string_view>

#include "tessera/backend/cpu/elementwise_loops.h"
#include "tessera/core/error.h"
#include "tessera/ops/tile_kernels.h"

namespace tessera::cpu {

namespace {

enum ChainOp : int {
  kAdd,
  kSub,
  kMul,
  kDiv,
  kMaximum,
  kMinimum,
  kReluBackward,
  kNeg,
  kAbs,
  kRelu,
  kSqrt,
};

int chain_op(std::string_view op) {
  if (!cpu_has_avx512()) return -1;
  constexpr std::pair<std::string_view, ChainOp> ops[] = {
      {"add", kAdd},
      {"sub", kSub},
      {"mul", kMul},
      {"div", kDiv},
      {"maximum", kMaximum},
      {"minimum", kMinimum},
      {"relu_backward", kReluBackward},
      {"neg", kNeg},
      {"abs", kAbs},
      {"relu", kRelu},
      {"sqrt", kSqrt},
  };
  for (const auto& [name, id] : ops) {
    if (name == op) return id;
  }
  return -1;
}

// The code below is built for AVX-512 (its lambdas too); chain_op() lets
// a run reach it only where the CPU has it.
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx512f,avx512dq,avx512bw,avx512vl"))), \
                             apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("arch=x86-64-v4,prefer-vector-width=512")
// GCC notes that passing __m512 by value has another ABI without AVX-512;
// every function here is internal and built with it.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpsabi"
#endif

// Either NaN operand, a's first; else a where a_wins, b elsewhere.
inline __m512 nan_first(__m512 a, __m512 b, __mmask16 a_wins) {
  __m512 out = _mm512_mask_blend_ps(a_wins, b, a);
  out = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(b, b, _CMP_UNORD_Q), out, b);
  return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(a, a, _CMP_UNORD_Q), out, a);
}

// Where a step's operand comes from: the chain's value, one number, or
// memory (masked to the lanes of a tail). A template argument, so a step's
// loop over its registers has no branch and loads only what it reads.
enum Kind : int { kValue, kSplat, kMemory };

struct Operand {
  Kind kind;
  __m512 splat;
  const float* data;
};

inline Operand operand_of(int from, const ChainArgs& args) {
  if (from < 0) return {kValue, _mm512_setzero_ps(), nullptr};
  if (args.scalar[from]) return {kSplat, _mm512_set1_ps(args.inputs[from][0]), nullptr};
  return {kMemory, _mm512_setzero_ps(), args.inputs[from]};
}

template <Kind kKind, bool kMasked>
inline __m512 fetch(const Operand& operand, __m512 value, int64_t at, __mmask16 lanes) {
  if constexpr (kKind == kValue) {
    return value;
  } else if constexpr (kKind == kSplat) {
    return operand.splat;
  } else if constexpr (kMasked) {
    return _mm512_maskz_loadu_ps(lanes, operand.data + at);
  } else {
    return _mm512_loadu_ps(operand.data + at);
  }
}

// One step over kVectors registers of 16 elements from `at`: value = f(a, b).
template <int kVectors, bool kMasked, Kind kA, Kind kB, typename F>
inline void step_block(const Operand& a, const Operand& b, __m512* value, int64_t at,
                       __mmask16 lanes, F f) {
#pragma GCC unroll 8
  for (int v = 0; v < kVectors; ++v) {
    const int64_t here = at + 16 * v;
    value[v] = f(fetch<kA, kMasked>(a, value[v], here, lanes),
                 fetch<kB, kMasked>(b, value[v], here, lanes));
  }
}

// The kinds are dispatched by plain switches: a generic helper taking lambdas
// (with_kind(a.kind, [&](auto ka) {...})) made GCC keep the chain's value in
// memory, not registers, and the chain ran 2.5x slower.
template <int kVectors, bool kMasked, Kind kA, typename F>
inline void step_block(const Operand& a, const Operand& b, __m512* value, int64_t at,
                       __mmask16 lanes, F f) {
  switch (b.kind) {
    case kValue:
      return step_block<kVectors, kMasked, kA, kValue>(a, b, value, at, lanes, f);
    case kSplat:
      return step_block<kVectors, kMasked, kA, kSplat>(a, b, value, at, lanes, f);
    default:
      return step_block<kVectors, kMasked, kA, kMemory>(a, b, value, at, lanes, f);
  }
}

template <int kVectors, bool kMasked, typename F>
inline void step_block(const Operand& a, const Operand& b, __m512* value, int64_t at,
                       __mmask16 lanes, F f) {
  switch (a.kind) {
    case kValue:
      return step_block<kVectors, kMasked, kValue>(a, b, value, at, lanes, f);
    case kSplat:
      return step_block<kVectors, kMasked, kSplat>(a, b, value, at, lanes, f);
    default:
      return step_block<kVectors, kMasked, kMemory>(a, b, value, at, lanes, f);
  }
}

// A step with its operands resolved for one call.
struct Prepared {
  int op;
  Operand a, b;
  float* out;
};

// Elements [at, at + kVectors * 16) of the chain; with kMasked (a tail of
// fewer than 16), those of `lanes` only.
template <int kVectors, bool kMasked>
inline void run_block(const Prepared* steps, size_t count, int64_t at, __mmask16 lanes) {
  const __m512 zero = _mm512_setzero_ps();
  const __m512 sign = _mm512_set1_ps(-0.0f);
  __m512 value[kVectors];  // the chain's value (the first step reads inputs only)
  for (int v = 0; v < kVectors; ++v) value[v] = zero;
  for (size_t s = 0; s < count; ++s) {
    const Prepared& step = steps[s];
    const Operand& a = step.a;
    const Operand& b = step.b;
    auto run = [&](auto f) { step_block<kVectors, kMasked>(a, b, value, at, lanes, f); };
    // Each op as its functor in elementwise.cpp computes it.
    switch (step.op) {
      case kAdd:
        run([](__m512 x, __m512 y) { return _mm512_add_ps(x, y); });
        break;
      case kSub:
        run([](__m512 x, __m512 y) { return _mm512_sub_ps(x, y); });
        break;
      case kMul:
        run([](__m512 x, __m512 y) { return _mm512_mul_ps(x, y); });
        break;
      case kDiv:
        run([](__m512 x, __m512 y) { return _mm512_div_ps(x, y); });
        break;
      case kMaximum:  // a > b ? a : b
        run([](__m512 x, __m512 y) {
          return nan_first(x, y, _mm512_cmp_ps_mask(x, y, _CMP_GT_OQ));
        });
        break;
      case kMinimum:  // a < b ? a : b
        run([](__m512 x, __m512 y) {
          return nan_first(x, y, _mm512_cmp_ps_mask(x, y, _CMP_LT_OQ));
        });
        break;
      case kReluBackward:  // y > 0 ? g : 0
        run([zero](__m512 g, __m512 y) {
          return _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(y, zero, _CMP_GT_OQ), g);
        });
        break;
      case kNeg:  // the sign bit flipped
        run([sign](__m512 x, __m512) { return _mm512_xor_ps(x, sign); });
        break;
      case kAbs:  // the sign bit cleared
        run([sign](__m512 x, __m512) { return _mm512_andnot_ps(sign, x); });
        break;
      case kRelu:  // x < 0 ? 0 : x (-0 and NaN stay)
        run([zero](__m512 x, __m512) {
          return _mm512_mask_mov_ps(x, _mm512_cmp_ps_mask(x, zero, _CMP_LT_OQ), zero);
        });
        break;
      default:  // kSqrt
        run([](__m512 x, __m512) { return _mm512_mask_sqrt_ps(x, 0xffff, x); });
        break;
    }
    if (step.out != nullptr) {
#pragma GCC unroll 8
      for (int v = 0; v < kVectors; ++v) {
        if constexpr (kMasked) {
          _mm512_mask_storeu_ps(step.out + at + 16 * v, lanes, value[v]);
        } else {
          _mm512_storeu_ps(step.out + at + 16 * v, value[v]);
        }
      }
    }
  }
}

void run_chain(const ChainStep* chain, size_t count, const ChainArgs& args) {
  Prepared steps[kMaxChainSteps];
  TESSERA_CHECK(count <= kMaxChainSteps, "[fused_elementwise] a chain of ", count,
                " steps; the chain kernel runs at most ", kMaxChainSteps);
  for (size_t s = 0; s < count; ++s) {
    const ChainStep& step = chain[s];
    steps[s] = {step.op, operand_of(step.operands[0], args),
                step.arity > 1 ? operand_of(step.operands[1], args)
                               : Operand{kValue, _mm512_setzero_ps(), nullptr},
                step.out};
  }
  int64_t at = 0;
  for (; at + 128 <= args.n; at += 128) run_block<8, false>(steps, count, at, 0xffff);
  for (; at + 16 <= args.n; at += 16) run_block<1, false>(steps, count, at, 0xffff);
  if (at < args.n) {
    run_block<1, true>(steps, count, at, static_cast<__mmask16>((1u << (args.n - at)) - 1));
  }
}

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC diagnostic pop
#pragma GCC pop_options
#endif

const bool chain_kernel_registered = register_chain_kernel({chain_op, run_chain});

}  // namespace

}  // namespace tessera::cpu
