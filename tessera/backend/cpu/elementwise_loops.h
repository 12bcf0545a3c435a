#pragma once

// The loops of the elementwise kernel families: a functor applied over one
// or two operands with strides and broadcasting, keeping the contiguous and
// scalar-operand cases as plain loops GCC vectorises. Shared by
// elementwise.cpp, math.cpp and activation.cpp. No pointer is __restrict:
// the output may be an input's memory (an in-place op, or a graph's memory
// plan writing over an input that dies there), element i over element i.

#include <type_traits>

#include "tessera/backend/cpu/loops.h"

namespace tessera::cpu {

// The build targets a portable AVX2 baseline; where the CPU has AVX-512, the
// contiguous f32 loops of the math functions (compute-bound: exp, erf, ...)
// run a 512-bit copy of the same code, chosen once at run time.
inline bool cpu_has_avx512() {
  static const bool available = __builtin_cpu_supports("avx512f") &&
                                __builtin_cpu_supports("avx512dq") &&
                                __builtin_cpu_supports("avx512bw") &&
                                __builtin_cpu_supports("avx512vl");
  return available;
}

template <typename Out, typename In, typename F>
void flat_unary(const F& f, Out* po, const In* pi, int64_t n) {
  const F op = f;  // a local copy: its members are loop invariants to GCC
  for (int64_t i = 0; i < n; ++i) po[i] = op(pi[i]);
}

// GCC takes an architecture and a preferred vector width; Clang takes the
// features (and uses 512-bit vectors where they are enabled).
#if defined(__clang__)
#define TESSERA_TARGET_AVX512 __attribute__((target("avx512f,avx512dq,avx512bw,avx512vl")))
#else
#define TESSERA_TARGET_AVX512 __attribute__((target("arch=x86-64-v4,prefer-vector-width=512")))
#endif

template <typename Out, typename In, typename F>
TESSERA_TARGET_AVX512 void flat_unary_avx512(const F& f, Out* po, const In* pi, int64_t n) {
  const F op = f;
  for (int64_t i = 0; i < n; ++i) po[i] = op(pi[i]);
}

// Two same-length flat runs (the binary loop's common case), as flat_unary.
template <typename Out, typename In, typename F>
void flat_binary(const F& f, Out* po, const In* pa, const In* pb, int64_t n) {
  const F op = f;
  for (int64_t i = 0; i < n; ++i) po[i] = op(pa[i], pb[i]);
}

template <typename Out, typename In, typename F>
TESSERA_TARGET_AVX512 void flat_binary_avx512(const F& f, Out* po, const In* pa, const In* pb,
                                              int64_t n) {
  const F op = f;
  for (int64_t i = 0; i < n; ++i) po[i] = op(pa[i], pb[i]);
}

template <typename Out, typename In, typename F>
void unary_loop(const Tensor& x, Tensor& out, const F& f) {
  if (x.is_contiguous()) {  // the common case: one flat run, no loop setup
    Out* po = static_cast<Out*>(out.raw_data());
    const In* pi = static_cast<const In*>(x.raw_data());
    constexpr bool wide = std::is_same_v<In, float> && std::is_same_v<Out, float>;
    const bool use_avx512 = wide && cpu_has_avx512();
    parallel_for(0, out.numel(), kElementwiseGrain, [&](int64_t lo, int64_t hi) {
      if (use_avx512) {
        flat_unary_avx512<Out, In, F>(f, po + lo, pi + lo, hi - lo);
      } else {
        flat_unary<Out, In, F>(f, po + lo, pi + lo, hi - lo);
      }
    });
    return;
  }
  auto loop = loop_over<2>(out, {x});
  Out* out_base = storage_ptr<Out>(out);
  const In* in_base = storage_ptr<In>(x);
  for_each_run(loop, [&](const std::array<int64_t, 2>& offsets,
                         const std::array<int64_t, 2>& strides, int64_t n) {
    Out* po = out_base + offsets[0];
    const In* pi = in_base + offsets[1];
    if (strides[1] == 1) {
      for (int64_t i = 0; i < n; ++i) po[i] = f(pi[i]);
    } else {
      for (int64_t i = 0; i < n; ++i) po[i] = f(pi[i * strides[1]]);
    }
  });
}

template <typename Out, typename In, typename F>
void binary_loop(const Tensor& a, const Tensor& b, Tensor& out, const F& f) {
  // Flat fast paths: same-shape contiguous operands, or one of them a scalar.
  const int64_t n = out.numel();
  const bool a_flat = a.is_contiguous() && a.numel() == n;
  const bool b_flat = b.is_contiguous() && b.numel() == n;
  if ((a_flat || a.numel() == 1) && (b_flat || b.numel() == 1)) {
    Out* po = static_cast<Out*>(out.raw_data());
    const In* pa = static_cast<const In*>(a.raw_data());
    const In* pb = static_cast<const In*>(b.raw_data());
    constexpr bool wide = std::is_same_v<In, float> && std::is_same_v<Out, float>;
    const bool use_avx512 = wide && cpu_has_avx512();
    parallel_for(0, n, kElementwiseGrain, [&](int64_t lo, int64_t hi) {
      if (a_flat && b_flat) {
        // In a function of its own, with a local copy of the functor, GCC
        // vectorises the math functors (gelu_backward's erf and exp) too.
        if (use_avx512) {
          flat_binary_avx512<Out, In, F>(f, po + lo, pa + lo, pb + lo, hi - lo);
        } else {
          flat_binary<Out, In, F>(f, po + lo, pa + lo, pb + lo, hi - lo);
        }
      } else if (a_flat) {
        const In vb = *pb;
        for (int64_t i = lo; i < hi; ++i) po[i] = f(pa[i], vb);
      } else if (b_flat) {
        const In va = *pa;
        for (int64_t i = lo; i < hi; ++i) po[i] = f(va, pb[i]);
      } else {
        for (int64_t i = lo; i < hi; ++i) po[i] = f(*pa, *pb);
      }
    });
    return;
  }
  auto loop = loop_over<3>(out, {a, b});
  Out* out_base = storage_ptr<Out>(out);
  const In* a_base = storage_ptr<In>(a);
  const In* b_base = storage_ptr<In>(b);
  for_each_run(loop, [&](const std::array<int64_t, 3>& offsets,
                         const std::array<int64_t, 3>& strides, int64_t n) {
    Out* po = out_base + offsets[0];
    const In* pa = a_base + offsets[1];
    const In* pb = b_base + offsets[2];
    if (strides[1] == 1 && strides[2] == 1) {
      for (int64_t i = 0; i < n; ++i) po[i] = f(pa[i], pb[i]);
    } else if (strides[1] == 1 && strides[2] == 0) {
      const In vb = *pb;
      for (int64_t i = 0; i < n; ++i) po[i] = f(pa[i], vb);
    } else if (strides[1] == 0 && strides[2] == 1) {
      const In va = *pa;
      for (int64_t i = 0; i < n; ++i) po[i] = f(va, pb[i]);
    } else {
      for (int64_t i = 0; i < n; ++i) po[i] = f(pa[i * strides[1]], pb[i * strides[2]]);
    }
  });
}

}  // namespace tessera::cpu
