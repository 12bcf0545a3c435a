// unfold (im2col) and fold (col2im): two linear ops, each the other's
// adjoint, so each one's gradient is the other. Kernels: backend/cpu/conv.cpp,
// beside the im2col that conv2d uses. pixel_shuffle and pixel_unshuffle are
// a reshape, a permute and a reshape.

#include "tessera/ops/unfold.h"

#include "tessera/ops/op.h"
#include "tessera/ops/sbp_rules.h"

namespace tessera {

namespace {

using Ints = std::vector<int64_t>;

Attrs window_attrs(const Ints& kernel, const Ints& dilation, const Ints& padding,
                   const Ints& stride, const char* op) {
  auto check_pair = [op](const Ints& values, const char* name, int64_t min) {
    TESSERA_CHECK(values.size() == 2, "[", op, "] ", name, " needs 2 values (height, width), got ",
                  values.size(), " (", shape_str(values), ")");
    TESSERA_CHECK(values[0] >= min && values[1] >= min, "[", op, "] ", name, " must be >= ", min,
                  ", got ", shape_str(values));
  };
  check_pair(kernel, "kernel_size", 1);
  check_pair(dilation, "dilation", 1);
  check_pair(padding, "padding", 0);
  check_pair(stride, "stride", 1);
  return {{"kernel_size", kernel}, {"dilation", dilation}, {"padding", padding},
          {"stride", stride}};
}

// The number of windows along height and width of an image of size hw.
Ints blocks(const Ints& hw, const Attrs& attrs, const char* op) {
  const Ints& k = attrs.ints("kernel_size");
  const Ints& s = attrs.ints("stride");
  const Ints& p = attrs.ints("padding");
  const Ints& d = attrs.ints("dilation");
  Ints out = {window_output_size(hw[0], k[0], s[0], p[0], d[0], op),
              window_output_size(hw[1], k[1], s[1], p[1], d[1], op)};
  TESSERA_CHECK(out[0] >= 1 && out[1] >= 1, "[", op, "] an image of size ", shape_str(hw),
                " with kernel_size ", shape_str(k), ", dilation ", shape_str(d), ", padding ",
                shape_str(p), " and stride ", shape_str(s), " has ", shape_str(out),
                " sliding blocks; both must be positive");
  return out;
}

void check_floating(const TensorMeta& meta, const char* op) {
  TESSERA_CHECK(is_floating(meta.dtype), "[", op, "] needs a floating tensor, got ",
                dtype_name(meta.dtype));
}

std::vector<SbpSignature> linear_batch_sbp(const MetaVector&, const Attrs&) {
  auto signatures = same_split_signatures(1, 1, {0});
  signatures.push_back(uniform_signature(1, 1, Sbp::partial_sum()));
  return signatures;
}

const OpDef& fold_op_ref();

const OpDef& unfold_op = register_op([] {
  OpDef def;
  def.name = "unfold";
  def.contiguous_inputs = true;
  def.kind = OpKind::indexing;
  def.torch_name = "torch.nn.functional.unfold";
  def.signature = "unfold(x, kernel_size, dilation, padding, stride)";
  def.infer = [](const MetaVector& in, const Attrs& attrs) {
    const char* op = "unfold";
    const Shape& x = in[0].shape;
    check_floating(in[0], op);
    TESSERA_CHECK(x.size() == 4, "[", op, "] expects [N, C, H, W], got ", shape_str(x));
    for (size_t d = 1; d < 4; ++d) {
      TESSERA_CHECK(x[d] > 0, "[", op, "] input ", shape_str(x),
                    " has an empty dim; only the batch may be 0");
    }
    Ints b = blocks({x[2], x[3]}, attrs, op);
    const Ints& k = attrs.ints("kernel_size");
    Shape out = {x[0], checked_mul(x[1], checked_mul(k[0], k[1], op), op),
                 checked_mul(b[0], b[1], op)};
    return MetaVector{{out, in[0].dtype, in[0].device}};
  };
  def.sbp = linear_batch_sbp;
  def.saves_inputs = false;
  def.grad = [](const GradContext& c) {
    Attrs attrs = c.attrs();
    const Shape& x = c.input_meta(0).shape;
    attrs.set("output_size", Ints{x[2], x[3]});
    return std::vector<Tensor>{call1(fold_op_ref(), {c.grad_output(0)}, attrs)};
  };
  return def;
}());

const OpDef& fold_op = register_op([] {
  OpDef def;
  def.name = "fold";
  def.contiguous_inputs = true;
  def.kind = OpKind::indexing;
  def.torch_name = "torch.nn.functional.fold";
  def.signature = "fold(x, output_size, kernel_size, dilation, padding, stride)";
  def.infer = [](const MetaVector& in, const Attrs& attrs) {
    const char* op = "fold";
    const Shape& x = in[0].shape;
    check_floating(in[0], op);
    TESSERA_CHECK(x.size() == 3, "[", op, "] expects [N, C * kh * kw, L], got ", shape_str(x));
    const Ints& size = attrs.ints("output_size");
    const Ints& k = attrs.ints("kernel_size");
    const int64_t taps = k[0] * k[1];
    TESSERA_CHECK(x[1] > 0 && x[1] % taps == 0, "[", op, "] input ", shape_str(x),
                  ": dim 1 must be a positive multiple of kh * kw = ", taps);
    Ints b = blocks(size, attrs, op);
    TESSERA_CHECK(x[2] == b[0] * b[1], "[", op, "] input ", shape_str(x), " has ", x[2],
                  " blocks, but output_size ", shape_str(size), " gives ", shape_str(b), " = ",
                  b[0] * b[1]);
    return MetaVector{{{x[0], x[1] / taps, size[0], size[1]}, in[0].dtype, in[0].device}};
  };
  def.sbp = linear_batch_sbp;
  def.saves_inputs = false;
  def.grad = [](const GradContext& c) {
    return std::vector<Tensor>{call1(unfold_op, {c.grad_output(0)}, c.attrs())};
  };
  return def;
}());

const OpDef& fold_op_ref() { return fold_op; }

}  // namespace

Tensor unfold(const Tensor& x, const Ints& kernel_size, const Ints& dilation, const Ints& padding,
              const Ints& stride) {
  const char* op = "unfold";
  TESSERA_CHECK(x.defined(), "[", op, "] got an undefined tensor");
  TESSERA_CHECK(x.dim() == 3 || x.dim() == 4, "[", op, "] expects a 3-D [C, H, W] or 4-D ",
                "[N, C, H, W] input, got ", shape_str(x.shape()));
  Attrs attrs = window_attrs(kernel_size, dilation, padding, stride, op);
  if (x.dim() == 3) return call1(unfold_op, {x.unsqueeze(0)}, attrs).squeeze(0);
  return call1(unfold_op, {x}, attrs);
}

Tensor fold(const Tensor& x, const Ints& output_size, const Ints& kernel_size, const Ints& dilation,
            const Ints& padding, const Ints& stride) {
  const char* op = "fold";
  TESSERA_CHECK(x.defined(), "[", op, "] got an undefined tensor");
  TESSERA_CHECK(x.dim() == 2 || x.dim() == 3, "[", op, "] expects a 2-D [C * kh * kw, L] or ",
                "3-D [N, C * kh * kw, L] input, got ", shape_str(x.shape()));
  Attrs attrs = window_attrs(kernel_size, dilation, padding, stride, op);
  TESSERA_CHECK(output_size.size() == 2 && output_size[0] >= 1 && output_size[1] >= 1, "[", op,
                "] output_size needs 2 positive values (height, width), got ",
                shape_str(output_size));
  attrs.set("output_size", output_size);
  if (x.dim() == 2) return call1(fold_op, {x.unsqueeze(0)}, attrs).squeeze(0);
  return call1(fold_op, {x}, attrs);
}

Tensor pixel_shuffle(const Tensor& x, int64_t upscale_factor) {
  const char* op = "pixel_shuffle";
  TESSERA_CHECK(x.defined(), "[", op, "] got an undefined tensor");
  TESSERA_CHECK(x.dim() >= 3, "[", op, "] expects at least 3 dims [*, C * r * r, H, W], got ",
                shape_str(x.shape()));
  const int64_t r = upscale_factor;
  TESSERA_CHECK(r > 0, "[", op, "] upscale_factor must be positive, got ", r);
  const Shape& s = x.shape();
  const size_t nd = s.size();
  const int64_t channels = s[nd - 3], h = s[nd - 2], w = s[nd - 1];
  const int64_t square = checked_mul(r, r, op);
  TESSERA_CHECK(channels % square == 0, "[", op, "] input ", shape_str(s), " has ", channels,
                " channels, not divisible by upscale_factor^2 = ", square);
  Shape lead(s.begin(), s.end() - 3);
  Shape split = lead;
  split.insert(split.end(), {channels / square, r, r, h, w});
  Ints order;
  for (size_t d = 0; d < lead.size(); ++d) order.push_back(static_cast<int64_t>(d));
  const auto b = static_cast<int64_t>(lead.size());
  order.insert(order.end(), {b, b + 3, b + 1, b + 4, b + 2});
  Shape out = lead;
  out.insert(out.end(), {channels / square, checked_mul(h, r, op), checked_mul(w, r, op)});
  return x.reshape(split).permute(order).reshape(out);
}

Tensor pixel_unshuffle(const Tensor& x, int64_t downscale_factor) {
  const char* op = "pixel_unshuffle";
  TESSERA_CHECK(x.defined(), "[", op, "] got an undefined tensor");
  TESSERA_CHECK(x.dim() >= 3, "[", op, "] expects at least 3 dims [*, C, H * r, W * r], got ",
                shape_str(x.shape()));
  const int64_t r = downscale_factor;
  TESSERA_CHECK(r > 0, "[", op, "] downscale_factor must be positive, got ", r);
  const Shape& s = x.shape();
  const size_t nd = s.size();
  const int64_t channels = s[nd - 3], h = s[nd - 2], w = s[nd - 1];
  TESSERA_CHECK(h % r == 0 && w % r == 0, "[", op, "] input ", shape_str(s),
                ": height and width must be divisible by downscale_factor ", r);
  // As PyTorch 1.13: an empty input comes back unchanged in shape.
  if (x.numel() == 0) return x.reshape(s);
  Shape lead(s.begin(), s.end() - 3);
  Shape split = lead;
  split.insert(split.end(), {channels, h / r, r, w / r, r});
  Ints order;
  for (size_t d = 0; d < lead.size(); ++d) order.push_back(static_cast<int64_t>(d));
  const auto b = static_cast<int64_t>(lead.size());
  order.insert(order.end(), {b, b + 2, b + 4, b + 1, b + 3});
  Shape out = lead;
  out.insert(out.end(), {checked_mul(channels, r * r, op), h / r, w / r});
  return x.reshape(split).permute(order).reshape(out);
}

}  // namespace tessera
