// Padding. Attributes are canonical per-dim vectors "before" and "after"
// (PyTorch's last-dim-first pair list is unpacked by the public function).
// A constant pad's gradient is a constant pad with negated pads (which crops
// the padding away, or zero-pads back what was cropped); the other modes
// read some input elements several times, so their gradient is
// pad_backward, which sums those reads. Kernels: backend/cpu/pad.cpp.

#include "tessera/ops/pad.h"

#include <algorithm>

#include "tessera/ops/op.h"

namespace tessera {

namespace {

const char* const kModes[] = {"constant", "reflect", "replicate", "circular"};

// Splits along unpadded dims stay splits.
std::vector<SbpSignature> unpadded_splits(const Attrs& attrs) {
  const auto& before = attrs.ints("before");
  const auto& after = attrs.ints("after");
  std::vector<SbpSignature> signatures;
  for (size_t d = 0; d < before.size(); ++d) {
    if (before[d] == 0 && after[d] == 0) {
      Sbp split = Sbp::split(static_cast<int64_t>(d));
      signatures.push_back({{split}, {split}});
    }
  }
  return signatures;
}

Shape padded_shape(const Shape& shape, const Attrs& attrs, int64_t sign) {
  const auto& before = attrs.ints("before");
  const auto& after = attrs.ints("after");
  Shape out = shape;
  for (size_t d = 0; d < out.size(); ++d) out[d] += sign * (before[d] + after[d]);
  return out;
}

Tensor pad_with(const Tensor& x, const std::vector<int64_t>& before,
                const std::vector<int64_t>& after, const std::string& mode, double value);
Tensor pad_backward(const Tensor& grad, const Attrs& attrs);

const OpDef& pad_op = register_op([] {
  OpDef def;
  def.name = "pad";
  def.kind = OpKind::indexing;
  def.torch_name = "torch.nn.functional.pad";
  def.signature = "pad(x, pads, mode, value)";
  def.infer = [](const MetaVector& in, const Attrs& attrs) {
    return MetaVector{{padded_shape(in[0].shape, attrs, 1), in[0].dtype, in[0].device}};
  };
  def.sbp = [](const MetaVector&, const Attrs& attrs) {
    auto signatures = unpadded_splits(attrs);
    // Every rank pads with the same value: fine for max and min, and for
    // sums when that value is 0 (or when padding copies input values).
    bool fills = attrs.get<std::string>("mode") == "constant";
    if (!fills || attrs.f("value") == 0.0) {
      signatures.push_back({{Sbp::partial_sum()}, {Sbp::partial_sum()}});
    }
    signatures.push_back({{Sbp::partial_max()}, {Sbp::partial_max()}});
    signatures.push_back({{Sbp::partial_min()}, {Sbp::partial_min()}});
    return signatures;
  };
  def.saves_inputs = false;
  def.grad = [](const GradContext& c) {
    const Attrs& attrs = c.attrs();
    const Tensor& g = c.grad_output(0);
    if (attrs.get<std::string>("mode") != "constant") {
      return std::vector<Tensor>{pad_backward(g, attrs)};
    }
    std::vector<int64_t> before = attrs.ints("before"), after = attrs.ints("after");
    for (size_t d = 0; d < before.size(); ++d) {
      before[d] = -before[d];
      after[d] = -after[d];
    }
    return std::vector<Tensor>{pad_with(g, before, after, "constant", 0.0)};
  };
  return def;
}());

const OpDef& pad_backward_op = register_op([] {
  OpDef def;
  def.name = "pad_backward";
  def.kind = OpKind::indexing;
  def.torch_name = "torch.ops.aten.reflection_pad2d_backward (and the other modes)";
  def.signature = "pad_backward (the gradient of pad in the reflect, replicate and circular modes)";
  def.infer = [](const MetaVector& in, const Attrs& attrs) {
    return MetaVector{{padded_shape(in[0].shape, attrs, -1), in[0].dtype, in[0].device}};
  };
  def.sbp = [](const MetaVector&, const Attrs& attrs) {
    auto signatures = unpadded_splits(attrs);
    signatures.push_back({{Sbp::partial_sum()}, {Sbp::partial_sum()}});
    return signatures;
  };
  def.saves_inputs = false;
  def.grad = [](const GradContext& c) {
    const Attrs& attrs = c.attrs();
    return std::vector<Tensor>{pad_with(c.grad_output(0), attrs.ints("before"), attrs.ints("after"),
                                        attrs.get<std::string>("mode"), 0.0)};
  };
  return def;
}());

Tensor pad_with(const Tensor& x, const std::vector<int64_t>& before,
                const std::vector<int64_t>& after, const std::string& mode, double value) {
  return call1(pad_op, {x},
               {{"before", before}, {"after", after}, {"mode", mode}, {"value", value}});
}

Tensor pad_backward(const Tensor& grad, const Attrs& attrs) {
  return call1(pad_backward_op, {grad},
               {{"before", attrs.ints("before")},
                {"after", attrs.ints("after")},
                {"mode", attrs.get<std::string>("mode")}});
}

}  // namespace

Tensor pad(const Tensor& x, const std::vector<int64_t>& pads, const std::string& mode,
           double value) {
  TESSERA_CHECK(x.defined(), "[pad] got an undefined tensor");
  bool known = false;
  for (const char* name : kModes) known = known || mode == name;
  TESSERA_CHECK(known, "[pad] unknown mode \"", mode,
                "\"; use \"constant\", \"reflect\", \"replicate\" or \"circular\"");
  const int64_t ndim = x.dim();
  TESSERA_CHECK(pads.size() % 2 == 0 && static_cast<int64_t>(pads.size()) <= 2 * ndim,
                "[pad] pads ", shape_str(pads), " has ", pads.size(),
                " entries for a tensor of shape ", shape_str(x.shape()),
                "; it needs (before, after) pairs from the last dim back, ", "at most 2 * ", ndim,
                " entries");
  std::vector<int64_t> before(ndim, 0), after(ndim, 0);
  for (size_t k = 0; k < pads.size() / 2; ++k) {
    before[ndim - 1 - k] = pads[2 * k];
    after[ndim - 1 - k] = pads[2 * k + 1];
  }
  const bool constant = mode == "constant";
  TESSERA_CHECK(constant || value == 0.0, "[pad] mode \"", mode, "\" takes no value (got ", value,
                "); only \"constant\" fills with a value");
  Shape padded = x.shape();
  for (int64_t d = 0; d < ndim; ++d) {
    int64_t size = x.shape()[d], b = before[d], a = after[d];
    if (b == 0 && a == 0) continue;
    padded[d] = checked_add(checked_add(size, b, "pad"), a, "pad");
    if (constant) {
      const int64_t kept = checked_add(checked_add(size, std::min<int64_t>(b, 0), "pad"),
                                       std::min<int64_t>(a, 0), "pad");
      // The cropped count in 128 bits: negating INT64_MIN would overflow.
      const auto cropped = -static_cast<__int128>(std::min<int64_t>(b, 0)) -
                           static_cast<__int128>(std::min<int64_t>(a, 0));
      TESSERA_CHECK(kept >= 0, "[pad] pads (", b, ", ", a, ") on dim ", d, " of size ", size,
                    " crop ", static_cast<unsigned long long>(cropped),
                    " elements; negative pads may crop at most the dim's size");
      continue;
    }
    TESSERA_CHECK(padded[d] >= (mode == "circular" ? 0 : 1), "[pad] pads (", b, ", ", a,
                  ") on dim ", d, " of size ", size, " leave ", padded[d],
                  " elements; mode \"", mode, "\" needs ",
                  mode == "circular" ? "a non-negative size" : "at least one");
    if (mode == "reflect") {
      TESSERA_CHECK(b < size && a < size, "[pad] reflect pads (", b, ", ", a, ") on dim ", d,
                    " of size ", size, " must each be less than the size");
    } else if (mode == "replicate") {
      TESSERA_CHECK(size > 0, "[pad] replicate cannot pad dim ", d, " of size 0");
    } else if (mode == "circular") {
      TESSERA_CHECK(b <= size && a <= size, "[pad] circular pads (", b, ", ", a, ") on dim ", d,
                    " of size ", size, " must each be at most the size (wrapping around once)");
      const int64_t kept = size + std::min<int64_t>(b, 0) + std::min<int64_t>(a, 0);
      TESSERA_CHECK(kept > 0 || padded[d] == 0, "[pad] circular pads (", b, ", ", a, ") on dim ",
                    d, " of size ", size, " crop every element and then pad; nothing to wrap");
    }
  }
  checked_numel(padded, "pad");
  if (mode == "circular") {
    // As PyTorch: negative pads crop first, and the rest wraps around what is left.
    std::vector<int64_t> crop_before(ndim), crop_after(ndim);
    bool crops = false;
    for (int64_t d = 0; d < ndim; ++d) {
      crop_before[d] = std::min<int64_t>(before[d], 0);
      crop_after[d] = std::min<int64_t>(after[d], 0);
      crops = crops || crop_before[d] < 0 || crop_after[d] < 0;
      before[d] = std::max<int64_t>(before[d], 0);
      after[d] = std::max<int64_t>(after[d], 0);
    }
    if (crops) {
      Tensor cropped = pad_with(x, crop_before, crop_after, "constant", 0.0);
      return pad_with(cropped, before, after, mode, 0.0);
    }
  }
  // Reflect and replicate with negative pads crop the padded result, which
  // is what the kernels compute when before < 0.
  return pad_with(x, before, after, mode, value);
}

}  // namespace tessera
