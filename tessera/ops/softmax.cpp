// Softmax and log-softmax: primitives with fused CPU kernels
// (backend/cpu/softmax.cpp) and gradients written with public ops.

#include "tessera/ops/softmax.h"

#include "tessera/ops/elementwise.h"
#include "tessera/ops/op.h"
#include "tessera/ops/reduce.h"

namespace tessera {

namespace {

// Every axis but the softmax dim can be split: rows are independent.
std::vector<SbpSignature> softmax_signatures(const MetaVector& in, const Attrs& attrs) {
  std::vector<SbpSignature> signatures;
  const int64_t dim = attrs.i("dim");
  for (int64_t d = 0; d < static_cast<int64_t>(in[0].shape.size()); ++d) {
    if (d != dim) signatures.push_back({{Sbp::split(d)}, {Sbp::split(d)}});
  }
  return signatures;
}

// The op reference's entries (docs/ops.md) for the ops built by the helpers below.
constexpr OpDoc kSoftmaxDocs[] = {
    {"softmax", "torch.softmax", "softmax(x, dim)"},
    {"log_softmax", "torch.log_softmax", "log_softmax(x, dim)"},
};

OpDef softmax_def(const char* name, GradFn grad) {
  OpDef def;
  def.name = name;
  def.kind = OpKind::normalization;
  document(def, kSoftmaxDocs);
  def.infer = [name](const MetaVector& in, const Attrs&) {
    TESSERA_CHECK(is_floating(in[0].dtype), "[", name, "] needs a floating tensor, got ",
                  dtype_name(in[0].dtype));
    return MetaVector{in[0]};
  };
  def.sbp = softmax_signatures;
  def.grad = std::move(grad);
  def.saves_outputs = true;
  return def;
}

Dims softmax_dim(const GradContext& c) {
  // A 0-d input reduces over its single element: nothing to sum over.
  return c.input_meta(0).shape.empty() ? Dims{} : Dims{c.attrs().i("dim")};
}

const OpDef& softmax_op = register_op(softmax_def("softmax", [](const GradContext& c) {
  const Tensor& g = c.grad_output(0);
  Tensor y = c.output(0);
  Tensor dot = sum(mul(g, y), softmax_dim(c), true);
  return std::vector<Tensor>{mul(y, sub(g, dot))};
}));

const OpDef& log_softmax_op = register_op(softmax_def("log_softmax", [](const GradContext& c) {
  const Tensor& g = c.grad_output(0);
  Tensor y = c.output(0);
  return std::vector<Tensor>{sub(g, mul(exp(y), sum(g, softmax_dim(c), true)))};
}));

Tensor apply(const OpDef& op, const Tensor& x, int64_t dim) {
  TESSERA_CHECK(x.defined(), "[", op.name, "] got an undefined tensor");
  TESSERA_CHECK(is_floating(x.dtype()), "[", op.name, "] needs a floating tensor, got ",
                dtype_name(x.dtype()), " of shape ", shape_str(x.shape()),
                "; cast first (x.to(DType::f32))");
  int64_t d = normalize_dim(dim, x.dim(), op.name.c_str());
  // A 0-d tensor is one row of one element; the kernels index shape[dim].
  if (x.dim() == 0) return apply(op, x.reshape({1}), 0).reshape({});
  return call1(op, {x}, {{"dim", d}});
}

// dtype=: x is cast before the op (so a half input is computed in f32).
Tensor cast_for(const char* op, const Tensor& x, std::optional<DType> dtype) {
  if (!dtype) return x;
  TESSERA_CHECK(x.defined(), "[", op, "] got an undefined tensor");
  TESSERA_CHECK(is_floating(*dtype), "[", op, "] dtype must be floating, got ",
                dtype_name(*dtype));
  return x.to(*dtype);
}

}  // namespace

Tensor softmax(const Tensor& x, int64_t dim, std::optional<DType> dtype) {
  return apply(softmax_op, cast_for("softmax", x, dtype), dim);
}

Tensor log_softmax(const Tensor& x, int64_t dim, std::optional<DType> dtype) {
  return apply(log_softmax_op, cast_for("log_softmax", x, dtype), dim);
}

}  // namespace tessera
