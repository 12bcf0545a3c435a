#include "tessera/backend/cpu/gemm.h"

#include <cblas.h>

#include <algorithm>
#include <type_traits>

#include "tessera/core/thread_pool.h"

namespace tessera {

namespace cpu {
namespace {

// OpenBLAS always runs single-threaded, set when this library loads: gemm
// below splits large products over Tessera's own pool instead. Its worker
// threads spin (sched_yield) for a while after every call, and on a machine
// with as many busy threads as cores that spinning starved the elementwise
// work that runs between products; one pool for everything leaves no
// foreign thread competing for the cores.
const bool blas_single_threaded = [] {
  openblas_set_num_threads(1);
  return true;
}();

// Below this many multiply-adds a product stays on one thread: splitting
// costs a wake-up and packs the shared operand twice.
constexpr int64_t kParallelWork = int64_t{1} << 20;
// Blocks start on multiples of this many rows or columns (the kernels' tile).
constexpr int64_t kBlockAlign = 16;

template <typename T>
void blas_gemm(bool transpose_a, bool transpose_b, int64_t m, int64_t n, int64_t k, T alpha,
               const T* a, int64_t lda, const T* b, int64_t ldb, T beta, T* c, int64_t ldc) {
  const CBLAS_TRANSPOSE ta = transpose_a ? CblasTrans : CblasNoTrans;
  const CBLAS_TRANSPOSE tb = transpose_b ? CblasTrans : CblasNoTrans;
  if constexpr (std::is_same_v<T, float>) {
    cblas_sgemm(CblasRowMajor, ta, tb, static_cast<int>(m), static_cast<int>(n),
                static_cast<int>(k), alpha, a, static_cast<int>(lda), b, static_cast<int>(ldb),
                beta, c, static_cast<int>(ldc));
  } else {
    cblas_dgemm(CblasRowMajor, ta, tb, static_cast<int>(m), static_cast<int>(n),
                static_cast<int>(k), alpha, a, static_cast<int>(lda), b, static_cast<int>(ldb),
                beta, c, static_cast<int>(ldc));
  }
}

// Splits C along its longer dim into one block per thread; each block is an
// independent single-threaded product.
template <typename T>
void parallel_gemm(bool transpose_a, bool transpose_b, int64_t m, int64_t n, int64_t k, T alpha,
                   const T* a, int64_t lda, const T* b, int64_t ldb, T beta, T* c, int64_t ldc) {
  const bool split_columns = n >= m;
  const int64_t extent = split_columns ? n : m;
  const int64_t parts = std::min<int64_t>(num_threads(), extent / kBlockAlign);
  if (parts <= 1 || m * n * k < kParallelWork) {
    blas_gemm(transpose_a, transpose_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    return;
  }
  auto boundary = [&](int64_t part) {
    return part == parts ? extent : extent * part / parts / kBlockAlign * kBlockAlign;
  };
  parallel_for(0, parts, 1, [&](int64_t first, int64_t last) {
    for (int64_t part = first; part < last; ++part) {
      const int64_t start = boundary(part), size = boundary(part + 1) - start;
      if (split_columns) {
        blas_gemm(transpose_a, transpose_b, m, size, k, alpha, a, lda,
                  transpose_b ? b + start * ldb : b + start, ldb, beta, c + start, ldc);
      } else {
        blas_gemm(transpose_a, transpose_b, size, n, k, alpha,
                  transpose_a ? a + start : a + start * lda, lda, b, ldb, beta, c + start * ldc,
                  ldc);
      }
    }
  });
}

}  // namespace

template <>
void gemm<float>(bool transpose_a, bool transpose_b, int64_t m, int64_t n, int64_t k, float alpha,
                 const float* a, int64_t lda, const float* b, int64_t ldb, float beta, float* c,
                 int64_t ldc) {
  parallel_gemm(transpose_a, transpose_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

template <>
void gemm<double>(bool transpose_a, bool transpose_b, int64_t m, int64_t n, int64_t k,
                  double alpha, const double* a, int64_t lda, const double* b, int64_t ldb,
                  double beta, double* c, int64_t ldc) {
  parallel_gemm(transpose_a, transpose_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

}  // namespace cpu
}  // namespace tessera
