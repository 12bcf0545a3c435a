// matmul: the public function (1-D promotion, type promotion), inference,
// SBP signatures and gradient. The op itself sees operands with at least two
// dims. Kernel: backend/cpu/matmul.cpp.

#include "tessera/ops/matmul.h"

#include "tessera/ops/elementwise.h"
#include "tessera/ops/op.h"
#include "tessera/ops/reduce.h"

namespace tessera {

namespace {

Shape batch_of(const Shape& shape) { return Shape(shape.begin(), shape.end() - 2); }

MetaVector infer_matmul(const MetaVector& in, const Attrs&) {
  const Shape& a = in[0].shape;
  const Shape& b = in[1].shape;
  TESSERA_CHECK(a.size() >= 2 && b.size() >= 2, "[matmul] the op needs operands with at least ",
                "2 dims, got ", shape_str(a), " and ", shape_str(b));
  TESSERA_CHECK(in[0].dtype == in[1].dtype, "[matmul] operands must share a dtype after ",
                "promotion, got ", dtype_name(in[0].dtype), " and ", dtype_name(in[1].dtype));
  TESSERA_CHECK(a.back() == b[b.size() - 2], "[matmul] inner dimensions differ: a is ",
                shape_str(a), " (", dtype_name(in[0].dtype), "), b is ", shape_str(b), " (",
                dtype_name(in[1].dtype), "); a.shape[-1] must equal b.shape[-2]");
  Shape out = broadcast_shapes(batch_of(a), batch_of(b), "matmul");
  out.push_back(a[a.size() - 2]);
  out.push_back(b.back());
  return {{out, in[0].dtype, in[0].device}};
}

// Rows of a and columns of b split their output; the shared k axis split in
// both gives partial sums; matmul is linear in each operand, so a partial
// operand times a broadcast one is partial; batch dims split like
// broadcasting elementwise ops.
std::vector<SbpSignature> matmul_sbp(const MetaVector& in, const Attrs& attrs) {
  const auto nd_a = static_cast<int64_t>(in[0].shape.size());
  const auto nd_b = static_cast<int64_t>(in[1].shape.size());
  const Shape out = infer_matmul(in, attrs)[0].shape;
  const auto nd_out = static_cast<int64_t>(out.size());
  const Sbp kB = Sbp::broadcast(), kPs = Sbp::partial_sum();
  std::vector<SbpSignature> signatures = {
      {{Sbp::split(nd_a - 2), kB}, {Sbp::split(nd_out - 2)}},
      {{kB, Sbp::split(nd_b - 1)}, {Sbp::split(nd_out - 1)}},
      {{Sbp::split(nd_a - 1), Sbp::split(nd_b - 2)}, {kPs}},
      {{kPs, kB}, {kPs}},
      {{kB, kPs}, {kPs}},
  };
  for (int64_t axis = 0; axis < nd_out - 2; ++axis) {
    SbpSignature signature;
    bool any_split = false;
    for (const TensorMeta& input : in) {
      int64_t input_axis = axis - (nd_out - static_cast<int64_t>(input.shape.size()));
      bool full = input_axis >= 0 && input.shape[input_axis] == out[axis];
      signature.inputs.push_back(full ? Sbp::split(input_axis) : kB);
      any_split = any_split || full;
    }
    signature.outputs.push_back(Sbp::split(axis));
    if (any_split) signatures.push_back(std::move(signature));
  }
  return signatures;
}

std::vector<Tensor> matmul_grad(const GradContext& c) {
  const Tensor& g = c.grad_output(0);
  const Tensor& a = c.input(0);
  const Tensor& b = c.input(1);
  std::vector<Tensor> grads(2);
  if (c.needs_input_grad(0)) {
    grads[0] = sum_to(matmul(g, b.transpose(-2, -1)), a.shape());
  }
  if (c.needs_input_grad(1)) {
    if (b.dim() == 2) {
      // A shared matrix: fold a's batch into rows so the reduction over the
      // batch happens inside one gemm instead of a batched product + sum.
      const int64_t k = a.shape().back(), n = b.shape().back();
      // The row count spelled out: -1 cannot be inferred when k or n is 0.
      int64_t rows = 1;
      for (int64_t d = 0; d + 1 < a.dim(); ++d) rows *= a.shape()[static_cast<size_t>(d)];
      const Tensor a_rows = a.reshape({rows, k}), g_rows = g.reshape({rows, n});
      // Lay the gradient out like b (as PyTorch does): for a transposed b,
      // such as Linear's weight.t(), (g^T a)^T is column-major, so the
      // gradient reaching the weight through the transpose is row-major and
      // the optimizer reads it without a copy.
      const bool b_column_major = b.size(0) > 1 && b.size(1) > 1 && b.strides()[0] == 1;
      grads[1] = b_column_major ? matmul(g_rows.t(), a_rows).t() : matmul(a_rows.t(), g_rows);
    } else {
      grads[1] = sum_to(matmul(a.transpose(-2, -1), g), b.shape());
    }
  }
  return grads;
}

const OpDef& matmul_op = register_op([] {
  OpDef def;
  def.name = "matmul";
  def.kind = OpKind::matmul;
  // 2·m·n·k per product: each output element is a k-long dot product.
  def.cost = [](const MetaVector& in, const MetaVector& out, const Attrs&) {
    const double inner = in[0].shape.empty() ? 1.0 : static_cast<double>(in[0].shape.back());
    OpCost cost;
    cost.flops = 2 * static_cast<double>(numel(out[0].shape)) * inner;
    for (const TensorMeta& meta : in) {
      cost.bytes +=
          static_cast<double>(numel(meta.shape) * static_cast<int64_t>(dtype_size(meta.dtype)));
    }
    cost.bytes +=
        static_cast<double>(numel(out[0].shape) * static_cast<int64_t>(dtype_size(out[0].dtype)));
    return cost;
  };
  def.torch_name = "torch.matmul";
  def.signature = "matmul(a, b)";
  def.infer = infer_matmul;
  def.sbp = matmul_sbp;
  def.grad = matmul_grad;
  return def;
}());

}  // namespace

Tensor matmul(const Tensor& a, const Tensor& b) {
  TESSERA_CHECK(a.defined() && b.defined(), "[matmul] got an undefined tensor");
  TESSERA_CHECK(a.dim() >= 1 && b.dim() >= 1, "[matmul] both operands need at least 1 dim, got ",
                "a ", shape_str(a.shape()), " and b ", shape_str(b.shape()),
                "; multiply by a scalar with mul()");
  const int64_t k_b = b.dim() == 1 ? b.shape()[0] : b.shape()[b.dim() - 2];
  TESSERA_CHECK(a.shape().back() == k_b, "[matmul] inner dimensions differ: a is ",
                shape_str(a.shape()), " (", dtype_name(a.dtype()), "), b is ",
                shape_str(b.shape()), " (", dtype_name(b.dtype()), "); a.shape[-1] must equal ",
                b.dim() == 1 ? "b.shape[0]" : "b.shape[-2]");
  DType common = promote_types(a.dtype(), b.dtype());
  TESSERA_CHECK(common != DType::boolean, "[matmul] is not defined for bool operands; cast to ",
                "an integer or floating dtype first");
  if (common == DType::u8) {
    // u8 products wrap modulo 256, which an i64 product cast back gives exactly.
    return matmul(a.to(DType::i64), b.to(DType::i64)).to(DType::u8);
  }
  Tensor lhs = a.dim() == 1 ? a.unsqueeze(0) : a;
  Tensor rhs = b.dim() == 1 ? b.unsqueeze(1) : b;
  if (lhs.dim() > 2 && rhs.dim() > 2) {
    Shape batch_a = batch_of(lhs.shape()), batch_b = batch_of(rhs.shape());
    size_t nd = std::max(batch_a.size(), batch_b.size());
    for (size_t i = 0; i < nd; ++i) {
      int64_t x = i < nd - batch_a.size() ? 1 : batch_a[i - (nd - batch_a.size())];
      int64_t y = i < nd - batch_b.size() ? 1 : batch_b[i - (nd - batch_b.size())];
      TESSERA_CHECK(x == y || x == 1 || y == 1, "[matmul] batch dims do not broadcast: a is ",
                    shape_str(a.shape()), ", b is ", shape_str(b.shape()),
                    "; dims before the last two must be equal or 1 (aligned from the right)");
    }
  }
  Tensor out = call1(matmul_op, {lhs.to(common), rhs.to(common)});
  if (a.dim() == 1) out = out.squeeze(out.dim() - 2);
  if (b.dim() == 1) out = out.squeeze(out.dim() - 1);
  return out;
}

}  // namespace tessera
