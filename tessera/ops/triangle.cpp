// tril and triu. Both are linear masks, so each one's gradient is itself
// applied to the incoming gradient. Kernels: backend/cpu/triangle.cpp.

#include "tessera/ops/triangle.h"

#include "tessera/ops/op.h"

namespace tessera {

namespace {

OpDef triangle_def(const char* name, bool lower) {
  OpDef def;
  def.name = name;
  def.infer = [](const MetaVector& in, const Attrs&) { return MetaVector{in[0]}; };
  def.sbp = [](const MetaVector& in, const Attrs&) {
    std::vector<SbpSignature> signatures;
    // Any axis may be split: localize shifts the diagonal by where a shard
    // of the matrix axes starts.
    for (int64_t d = 0; d < static_cast<int64_t>(in[0].shape.size()); ++d) {
      signatures.push_back({{Sbp::split(d)}, {Sbp::split(d)}});
    }
    // Masked entries are 0 on every rank, which sums, maxes and mins to 0.
    for (Sbp partial : {Sbp::partial_sum(), Sbp::partial_max(), Sbp::partial_min()}) {
      signatures.push_back({{partial}, {partial}});
    }
    return signatures;
  };
  def.localize = [](const Attrs& attrs, const MetaVector& local, const MetaVector&,
                    const ShardOffsets& offsets) {
    const size_t ndim = local[0].shape.size();
    const auto& start = offsets[0];
    Attrs result = attrs;
    result.set("diagonal", attrs.i("diagonal") + start[ndim - 2] - start[ndim - 1]);
    return result;
  };
  def.torch_name = lower ? "torch.tril" : "torch.triu";
  def.signature = lower ? "tril(x, diagonal)" : "triu(x, diagonal)";
  def.saves_inputs = false;
  def.grad = [lower](const GradContext& c) {
    int64_t diagonal = c.attrs().i("diagonal");
    const Tensor& g = c.grad_output(0);
    return std::vector<Tensor>{lower ? tril(g, diagonal) : triu(g, diagonal)};
  };
  return def;
}

const OpDef& tril_op = register_op(triangle_def("tril", true));
const OpDef& triu_op = register_op(triangle_def("triu", false));

Tensor checked(const OpDef& op, const Tensor& x, int64_t diagonal) {
  TESSERA_CHECK(x.defined(), "[", op.name, "] got an undefined tensor");
  // PyTorch returns an empty 1-D input as it is (it has no elements to mask).
  if (x.dim() == 1 && x.numel() == 0) return x.clone();
  TESSERA_CHECK(x.dim() >= 2, "[", op.name, "] needs a tensor with at least 2 dims (matrices in ",
                "the last two), got shape ", shape_str(x.shape()));
  return call1(op, {x}, {{"diagonal", diagonal}});
}

}  // namespace

Tensor tril(const Tensor& x, int64_t diagonal) {
  return checked(tril_op, x, diagonal);
}
Tensor triu(const Tensor& x, int64_t diagonal) {
  return checked(triu_op, x, diagonal);
}

}  // namespace tessera
