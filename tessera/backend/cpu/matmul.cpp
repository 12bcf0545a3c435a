// CPU kernel for matmul (ops/matmul.cpp): BLAS for floating types, a plain
// loop for integers. Operands whose last two dims are row- or column-major
// go to BLAS as they are (a transposed view becomes a BLAS transpose), so
// contiguous and transposed inputs are never copied.

#include <algorithm>
#include <cstring>
#include <optional>

#include "tessera/backend/cpu/gemm.h"
#include "tessera/backend/cpu/loops.h"
#include "tessera/core/grad_mode.h"
#include "tessera/ops/op.h"

namespace tessera::cpu {

namespace {

// How one matrix (rows x cols, strides in elements) is handed to BLAS.
struct BlasMatrix {
  bool transpose = false;
  int64_t ld = 1;
};

std::optional<BlasMatrix> blas_layout(int64_t rows, int64_t cols, int64_t row_stride,
                                      int64_t col_stride) {
  // Size-1 dims have meaningless strides; BLAS only needs ld >= max(1, cols).
  if ((cols == 1 || col_stride == 1) && (rows == 1 || row_stride >= std::max<int64_t>(cols, 1))) {
    return BlasMatrix{false, rows == 1 ? std::max<int64_t>(cols, 1) : row_stride};
  }
  if ((rows == 1 || row_stride == 1) && (cols == 1 || col_stride >= std::max<int64_t>(rows, 1))) {
    return BlasMatrix{true, cols == 1 ? std::max<int64_t>(rows, 1) : col_stride};
  }
  return std::nullopt;
}

std::optional<BlasMatrix> blas_layout(const Tensor& t) {
  const int64_t nd = t.dim();
  return blas_layout(t.shape()[nd - 2], t.shape()[nd - 1], t.strides()[nd - 2],
                     t.strides()[nd - 1]);
}

// Per batch dim of the output: the operand's stride (0 where it broadcasts).
Strides batch_strides(const Tensor& t, const Shape& batch) {
  Strides strides(batch.size(), 0);
  const int64_t lead = static_cast<int64_t>(batch.size()) - (t.dim() - 2);
  for (int64_t d = 0; d < t.dim() - 2; ++d) {
    if (t.shape()[d] != 1) strides[d + lead] = t.strides()[d];
  }
  return strides;
}

// Row stride when a's batch dims and rows merge into one run of rows (a
// row-major matrix stacked with uniform stride), else nullopt.
std::optional<int64_t> folded_row_stride(const Tensor& a, const Strides& a_batch,
                                         const Shape& batch, int64_t m, int64_t k) {
  if (k > 1 && a.strides().back() != 1) return std::nullopt;
  std::vector<std::pair<int64_t, int64_t>> dims;  // (size, stride), outer to inner
  for (size_t d = 0; d < batch.size(); ++d) {
    if (batch[d] != 1) dims.emplace_back(batch[d], a_batch[d]);
  }
  if (m != 1) dims.emplace_back(m, a.strides()[a.dim() - 2]);
  if (dims.empty()) return std::max<int64_t>(k, 1);
  int64_t stride = dims.back().second;
  if (stride < std::max<int64_t>(k, 1)) return std::nullopt;
  for (size_t i = dims.size() - 1; i-- > 0;) {
    if (dims[i].second != dims[i + 1].second * dims[i + 1].first) return std::nullopt;
  }
  return stride;
}

// Calls fn(batch_index, a_offset, b_offset) for each batch entry in order.
template <typename Fn>
void for_each_batch(const Shape& batch, const Strides& sa, const Strides& sb, Fn&& fn) {
  const int64_t count = numel(batch);
  std::vector<int64_t> index(batch.size(), 0);
  int64_t off_a = 0, off_b = 0;
  for (int64_t i = 0; i < count; ++i) {
    fn(i, off_a, off_b);
    for (size_t d = batch.size(); d-- > 0;) {
      off_a += sa[d];
      off_b += sb[d];
      if (++index[d] < batch[d]) break;
      off_a -= sa[d] * batch[d];
      off_b -= sb[d] * batch[d];
      index[d] = 0;
    }
  }
}

Tensor dense(const Tensor& t) {
  NoGradGuard no_grad;
  return t.contiguous();
}

template <typename T>
void blas_matmul(Tensor a, Tensor b, Tensor& out) {
  std::optional<BlasMatrix> la = blas_layout(a), lb = blas_layout(b);
  if (!la) {
    a = dense(a);
    la = blas_layout(a);
  }
  if (!lb) {
    b = dense(b);
    lb = blas_layout(b);
  }
  const int64_t nd = out.dim();
  const int64_t m = out.shape()[nd - 2], n = out.shape()[nd - 1], k = a.shape().back();
  const Shape batch(out.shape().begin(), out.shape().end() - 2);
  const Strides sa = batch_strides(a, batch), sb = batch_strides(b, batch);
  const T* pa = storage_ptr<T>(a) + a.offset();
  const T* pb = storage_ptr<T>(b) + b.offset();
  T* pc = out.data<T>();
  const bool b_shared = std::all_of(sb.begin(), sb.end(), [](int64_t s) { return s == 0; });
  if (b_shared && !la->transpose) {
    if (auto row_stride = folded_row_stride(a, sa, batch, m, k)) {
      gemm<T>(false, lb->transpose, numel(batch) * m, n, k, T(1), pa, *row_stride, pb, lb->ld,
              T(0), pc, n);
      return;
    }
  }
  std::vector<int64_t> offsets_a, offsets_b;
  for_each_batch(batch, sa, sb, [&](int64_t, int64_t off_a, int64_t off_b) {
    offsets_a.push_back(off_a);
    offsets_b.push_back(off_b);
  });
  // One product per batch entry, spread over the pool (each then runs on one
  // thread: gemm called inside parallel_for does not split again).
  const int64_t count = static_cast<int64_t>(offsets_a.size());
  parallel_for(0, count, count > 1 ? 1 : 2, [&](int64_t lo, int64_t hi) {
    for (int64_t i = lo; i < hi; ++i) {
      gemm<T>(la->transpose, lb->transpose, m, n, k, T(1), pa + offsets_a[i], la->ld,
              pb + offsets_b[i], lb->ld, T(0), pc + i * m * n, n);
    }
  });
}

template <typename T>
void integer_matmul(const Tensor& a, const Tensor& b, Tensor& out) {
  const int64_t nd = out.dim();
  const int64_t m = out.shape()[nd - 2], n = out.shape()[nd - 1], k = a.shape().back();
  const Shape batch(out.shape().begin(), out.shape().end() - 2);
  const Strides sa = batch_strides(a, batch), sb = batch_strides(b, batch);
  std::vector<int64_t> offsets_a, offsets_b;
  for_each_batch(batch, sa, sb, [&](int64_t, int64_t off_a, int64_t off_b) {
    offsets_a.push_back(off_a);
    offsets_b.push_back(off_b);
  });
  const T* pa = storage_ptr<T>(a) + a.offset();
  const T* pb = storage_ptr<T>(b) + b.offset();
  T* pc = out.data<T>();
  const int64_t am = a.strides()[a.dim() - 2], ak = a.strides()[a.dim() - 1];
  const int64_t bk = b.strides()[b.dim() - 2], bn = b.strides()[b.dim() - 1];
  const int64_t rows = numel(batch) * m;
  parallel_for(0, rows, std::max<int64_t>(1, 4096 / std::max<int64_t>(n * k, 1)),
               [&](int64_t lo, int64_t hi) {
                 for (int64_t row = lo; row < hi; ++row) {
                   const int64_t bi = row / m, i = row % m;
                   const T* arow = pa + offsets_a[bi] + i * am;
                   const T* bmat = pb + offsets_b[bi];
                   T* crow = pc + row * n;
                   std::fill(crow, crow + n, T(0));
                   for (int64_t p = 0; p < k; ++p) {
                     const T scale = arow[p * ak];
                     const T* brow = bmat + p * bk;
                     for (int64_t j = 0; j < n; ++j) crow[j] += scale * brow[j * bn];
                   }
                 }
               });
}

void matmul_kernel(KernelContext& ctx) {
  Tensor& out = ctx.outputs[0];
  const Tensor& a = ctx.inputs[0];
  if (out.numel() == 0) return;
  if (a.shape().back() == 0) {
    std::memset(out.raw_data(), 0, static_cast<size_t>(out.numel()) * dtype_size(out.dtype()));
    return;
  }
  switch (out.dtype()) {
    case DType::f32: blas_matmul<float>(a, ctx.inputs[1], out); break;
    case DType::f64: blas_matmul<double>(a, ctx.inputs[1], out); break;
    case DType::i64: integer_matmul<int64_t>(a, ctx.inputs[1], out); break;
    case DType::i32: integer_matmul<int32_t>(a, ctx.inputs[1], out); break;
    default: TESSERA_FAIL("[matmul] no CPU kernel for dtype ", dtype_name(out.dtype()));
  }
}

TESSERA_REGISTER_KERNEL("matmul", cpu, matmul_kernel, ::tessera::DType::f32,
                        ::tessera::DType::f64, ::tessera::DType::i64, ::tessera::DType::i32);

}  // namespace

}  // namespace tessera::cpu
