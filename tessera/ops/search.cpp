// searchsorted and bucketize (search.h). Kernel: backend/cpu/search.cpp.

#include "tessera/ops/search.h"

#include <algorithm>

#include "tessera/ops/elementwise.h"
#include "tessera/ops/index.h"
#include "tessera/ops/op.h"

namespace tessera {

namespace {

const OpDef& searchsorted_op = register_op([] {
  OpDef def;
  def.name = "searchsorted";
  def.infer = [](const MetaVector& in, const Attrs& attrs) {
    TensorMeta out = in[1];
    out.dtype = attrs.b("out_int32") ? DType::i32 : DType::i64;
    return MetaVector{out};
  };
  def.sbp = [](const MetaVector& in, const Attrs&) {
    std::vector<SbpSignature> signatures;
    const int64_t ndim = static_cast<int64_t>(in[1].shape.size());
    // Values may be split anywhere against a whole 1-D sequence; with
    // matching leading dims, both split on a leading dim.
    for (int64_t d = 0; d < ndim; ++d) {
      if (in[0].shape.size() == 1) {
        signatures.push_back({{Sbp::broadcast(), Sbp::split(d)}, {Sbp::split(d)}});
      } else if (d + 1 < ndim) {
        signatures.push_back({{Sbp::split(d), Sbp::split(d)}, {Sbp::split(d)}});
      }
    }
    return signatures;
  };
  def.torch_name = "torch.searchsorted, torch.bucketize";
  def.signature = "searchsorted(sorted_sequence, values, out_int32, right, side, sorter); "
                  "bucketize(x, boundaries, out_int32, right)";
  def.differentiable = false;
  return def;
}());

// The input in the dtype a scan computes in: `dtype` when given, else i64

}  // namespace

Tensor searchsorted(const Tensor& sorted_sequence, const Tensor& values, bool out_int32, bool right,
                    const std::optional<std::string>& side, const Tensor& sorter) {
  TESSERA_CHECK(sorted_sequence.defined() && values.defined(),
                "[searchsorted] got an undefined tensor");
  if (side) {
    TESSERA_CHECK(*side == "left" || *side == "right", "[searchsorted] side must be \"left\" or ",
                  "\"right\", got \"", *side, "\"");
    TESSERA_CHECK(!right || *side == "right", "[searchsorted] side = \"left\" and right = true ",
                  "contradict each other; pass one of them");
    right = *side == "right";
  }
  const Shape& seq_shape = sorted_sequence.shape();
  TESSERA_CHECK(sorted_sequence.dim() >= 1, "[searchsorted] sorted_sequence must have at least ",
                "1 dim, got a 0-d tensor");
  if (sorted_sequence.dim() > 1) {
    bool leading_match = values.dim() == sorted_sequence.dim() &&
                         std::equal(seq_shape.begin(), seq_shape.end() - 1, values.shape().begin());
    TESSERA_CHECK(leading_match, "[searchsorted] sorted_sequence ", shape_str(seq_shape),
                  " and values ", shape_str(values.shape()), " must have the same leading dims ",
                  "(all but the last), or sorted_sequence must be 1-D");
  }
  Tensor sequence = sorted_sequence;
  if (sorter.defined()) {
    TESSERA_CHECK(sorter.shape() == seq_shape, "[searchsorted] sorter ", shape_str(sorter.shape()),
                  " must have sorted_sequence's shape ", shape_str(seq_shape));
    TESSERA_CHECK(sorter.dtype() == DType::i64, "[searchsorted] sorter must be i64, got ",
                  dtype_name(sorter.dtype()));
    sequence = gather(sorted_sequence, -1, sorter);
  }
  DType common = promote_types(sequence.dtype(), values.dtype());
  TESSERA_CHECK(common != DType::boolean, "[searchsorted] does not search bool tensors; ",
                "supported: f32, f64, bf16, f16, i64, i32, u8");
  // 16-bit floats compare exactly in f32.
  if (common == DType::bf16 || common == DType::f16) common = DType::f32;
  Tensor seq_input = (sequence.dtype() == common ? sequence : cast(sequence, common)).contiguous();
  Tensor value_input = (values.dtype() == common ? values : cast(values, common)).contiguous();
  return call1(searchsorted_op, {seq_input.detach(), value_input.detach()},
               {{"right", right}, {"out_int32", out_int32}});
}

Tensor bucketize(const Tensor& x, const Tensor& boundaries, bool out_int32, bool right) {
  TESSERA_CHECK(boundaries.defined() && boundaries.dim() == 1,
                "[bucketize] boundaries must be 1-D, got shape ",
                boundaries.defined() ? shape_str(boundaries.shape()) : std::string("undefined"));
  return searchsorted(boundaries, x, out_int32, right);
}
}  // namespace tessera
