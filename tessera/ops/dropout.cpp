// dropout: the op carries the Philox (seed, offset) and the logical shape and
// shard start of its input, so its kernel recomputes any element's mask from
// the element's global index. The gradient is the same op with the same
// attrs applied to the incoming gradient (dropout is linear in x for a fixed
// mask), which also makes every higher-order gradient exact. Kernel:
// backend/cpu/dropout.cpp.

#include "tessera/ops/dropout.h"

#include "tessera/ops/elementwise.h"
#include "tessera/ops/op.h"
#include "tessera/ops/sbp_rules.h"

namespace tessera {

namespace {

const OpDef& dropout_op = register_op([] {
  OpDef def;
  def.name = "dropout";
  def.kind = OpKind::random;
  def.torch_name = "torch.nn.functional.dropout";
  def.signature = "dropout(x, p, training)";
  def.infer = [](const MetaVector& in, const Attrs&) {
    TESSERA_CHECK(is_floating(in[0].dtype), "[dropout] needs a floating tensor, got ",
                  dtype_name(in[0].dtype));
    return MetaVector{in[0]};
  };
  def.sbp = [](const MetaVector& in, const Attrs&) {
    std::vector<int64_t> axes;
    for (int64_t d = 0; d < static_cast<int64_t>(in[0].shape.size()); ++d) axes.push_back(d);
    auto signatures = same_split_signatures(1, 1, axes);
    // Every rank scales its partial values with the same mask.
    signatures.push_back(uniform_signature(1, 1, Sbp::partial_sum()));
    return signatures;
  };
  // A shard's elements sit at shard_start (+ its local index) in the logical tensor.
  def.localize = [](const Attrs& attrs, const MetaVector&, const MetaVector&,
                    const ShardOffsets& offsets) {
    std::vector<int64_t> start = attrs.ints("shard_start");
    for (size_t d = 0; d < start.size(); ++d) start[d] += offsets[0][d];
    Attrs result = attrs;
    result.set("shard_start", start);
    return result;
  };
  def.saves_inputs = false;
  def.grad = [](const GradContext& c) {
    return std::vector<Tensor>{call1(dropout_op, {c.grad_output(0)}, c.attrs())};
  };
  return def;
}());

}  // namespace

Tensor dropout(const Tensor& x, double p, bool training, Generator* generator) {
  TESSERA_CHECK(x.defined(), "[dropout] got an undefined tensor");
  TESSERA_CHECK(p >= 0.0 && p <= 1.0, "[dropout] probability p must be in [0, 1], got ", p);
  TESSERA_CHECK(is_floating(x.dtype()), "[dropout] needs a floating tensor, got ",
                dtype_name(x.dtype()), " (shape ", shape_str(x.shape()), ")");
  if (!training || p == 0.0) return x;
  if (p == 1.0) return mul(x, 0.0);
  Generator& gen = generator ? *generator : default_generator();
  // One Philox block gives the words for four consecutive elements.
  const uint64_t offset = gen.reserve((static_cast<uint64_t>(x.numel()) + 3) / 4);
  Attrs attrs{{"p", p},
              {"seed", static_cast<int64_t>(gen.seed())},
              {"offset", static_cast<int64_t>(offset)},
              {"logical_shape", x.shape()},
              {"shard_start", std::vector<int64_t>(x.shape().size(), 0)}};
  return call1(dropout_op, {x}, attrs);
}

}  // namespace tessera
