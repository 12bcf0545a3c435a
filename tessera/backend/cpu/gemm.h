#pragma once

// The one entry point to BLAS: row-major C = alpha * op(A) * op(B) + beta * C.
// Only gemm.cpp includes cblas.h.

#include <cstdint>

namespace tessera::cpu {

template <typename T>
void gemm(bool transpose_a, bool transpose_b, int64_t m, int64_t n, int64_t k, T alpha, const T* a,
          int64_t lda, const T* b, int64_t ldb, T beta, T* c, int64_t ldc);

}  // namespace tessera::cpu
