#pragma once

// Linear algebra beyond matmul, composed of matmul, views and the indexing
// ops, as PyTorch defines it: mm, bmm, mv, dot, outer, addmm, addmv,
// baddbmm, addbmm, tensordot, diag, diagonal, trace, cross / linalg_cross.
// Gradients are those of the ops they are made of.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "tessera/core/tensor.h"
#include "tessera/ops/scalar.h"

namespace tessera {

// [n, k] x [k, m] -> [n, m]; both must be matrices.
Tensor mm(const Tensor& a, const Tensor& b);
// [b, n, k] x [b, k, m] -> [b, n, m]; no broadcasting (use matmul for that).
Tensor bmm(const Tensor& a, const Tensor& b);
// [n, k] x [k] -> [n].
Tensor mv(const Tensor& a, const Tensor& v);
// Inner product of two 1-D tensors of one length and dtype, 0-d.
Tensor dot(const Tensor& a, const Tensor& b);
// Outer product of two 1-D tensors: [n] x [m] -> [n, m].
Tensor outer(const Tensor& a, const Tensor& b);
// beta * input + alpha * (m1 @ m2), input broadcast to the product's shape;
// with beta = 0 input is ignored (NaN in it does not propagate).
Tensor addmm(const Tensor& input, const Tensor& m1, const Tensor& m2, Scalar beta = 1,
             Scalar alpha = 1);
Tensor addmv(const Tensor& input, const Tensor& mat, const Tensor& vec, Scalar beta = 1,
             Scalar alpha = 1);
Tensor baddbmm(const Tensor& input, const Tensor& batch1, const Tensor& batch2, Scalar beta = 1,
               Scalar alpha = 1);
// beta * input + alpha * sum over the batch of batch1[i] @ batch2[i].
Tensor addbmm(const Tensor& input, const Tensor& batch1, const Tensor& batch2, Scalar beta = 1,
              Scalar alpha = 1);
// Contracts the last `dims` dims of a with the first `dims` of b.
Tensor tensordot(const Tensor& a, const Tensor& b, int64_t dims = 2);
// Contracts dims_a of a with dims_b of b, pairwise.
Tensor tensordot(const Tensor& a, const Tensor& b, const std::vector<int64_t>& dims_a,
                 const std::vector<int64_t>& dims_b);
// 1-D v -> square matrix with v on the `diagonal`-th diagonal; 2-D -> that
// diagonal as 1-D.
Tensor diag(const Tensor& x, int64_t diagonal = 0);
// The offset diagonal of the planes spanned by dim1 and dim2, moved to the
// last dim (a copy; gradients flow back to the diagonal).
Tensor diagonal(const Tensor& x, int64_t offset = 0, int64_t dim1 = 0, int64_t dim2 = 1);
// Sum of the main diagonal of a matrix, 0-d.
Tensor trace(const Tensor& x);
// Cross product of 3-vectors along dim (a and b broadcast); without dim,
// the first dim of size 3, as torch.cross does.
Tensor cross(const Tensor& a, const Tensor& b, std::optional<int64_t> dim = std::nullopt);
// torch.linalg.cross: along dim, -1 by default.
Tensor linalg_cross(const Tensor& a, const Tensor& b, int64_t dim = -1);

// torch.einsum: "ij,jk->ik", with "..." for broadcast dims, repeated
// subscripts in one operand for diagonals, and the implicit output (the
// subscripts that appear once, sorted) without "->". Operands of one dtype;
// contracted left to right, each pair as one batched matmul.
Tensor einsum(const std::string& equation, const std::vector<Tensor>& operands);

// torch.linalg.vector_norm: (sum |x|^ord)^(1/ord) over dims (all when empty);
// ord = inf is max |x|, -inf min |x|, 0 the count of nonzeros. x is cast to
// dtype first when given. The gradient at a zero norm is zero, as PyTorch's.
Tensor vector_norm(const Tensor& x, double ord = 2.0, const std::vector<int64_t>& dims = {},
                   bool keepdim = false, std::optional<DType> dtype = std::nullopt);
// torch.norm with a numeric p: vector_norm over dims (all when empty).
Tensor norm(const Tensor& x, double p = 2.0, const std::vector<int64_t>& dims = {},
            bool keepdim = false);
// torch.norm with p = "fro" (the 2-norm over dims, all when empty); "nuc"
// and other matrix norms are not implemented and raise.
Tensor norm(const Tensor& x, const std::string& p, const std::vector<int64_t>& dims = {},
            bool keepdim = false);

}  // namespace tessera
