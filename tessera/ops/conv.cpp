// conv2d and its two gradient ops. Each is a registered op with inference,
// SBP signatures and a gradient written with the others, so gradients of
// any order exist. Kernels: backend/cpu/conv.cpp.

#include "tessera/ops/conv.h"

#include "tessera/ops/op.h"
#include "tessera/ops/reduce.h"

namespace tessera {

namespace {

const Sbp kB = Sbp::broadcast();
const Sbp kPs = Sbp::partial_sum();
Sbp split(int64_t axis) { return Sbp::split(axis); }

struct ConvAttrs {
  std::vector<int64_t> stride, padding, dilation;
  int64_t groups;
  explicit ConvAttrs(const Attrs& attrs)
      : stride(attrs.ints("stride")),
        padding(attrs.ints("padding")),
        dilation(attrs.ints("dilation")),
        groups(attrs.i("groups")) {}
};

Attrs make_attrs(const std::vector<int64_t>& stride, const std::vector<int64_t>& padding,
                 const std::vector<int64_t>& dilation, int64_t groups, const char* op) {
  auto check_pair = [op](const std::vector<int64_t>& values, const char* name, int64_t min) {
    TESSERA_CHECK(values.size() == 2, "[", op, "] ", name, " needs 2 values (height, width), got ",
                  values.size(), " (", shape_str(values), ")");
    TESSERA_CHECK(values[0] >= min && values[1] >= min, "[", op, "] ", name, " must be >= ", min,
                  ", got ", shape_str(values));
  };
  check_pair(stride, "stride", 1);
  check_pair(padding, "padding", 0);
  check_pair(dilation, "dilation", 1);
  TESSERA_CHECK(groups >= 1, "[", op, "] groups must be positive, got ", groups);
  return {{"stride", stride}, {"padding", padding}, {"dilation", dilation}, {"groups", groups}};
}

void check_4d(const TensorMeta& meta, const char* op, const char* what, const char* layout) {
  TESSERA_CHECK(meta.shape.size() == 4, "[", op, "] ", what, " must be 4-D ", layout, ", got ",
                shape_str(meta.shape));
}

void check_same_dtype(const MetaVector& in, const char* op) {
  for (const TensorMeta& meta : in) {
    TESSERA_CHECK(meta.dtype == in[0].dtype, "[", op, "] inputs must share a dtype, got ",
                  dtype_name(in[0].dtype), " and ", dtype_name(meta.dtype));
  }
  TESSERA_CHECK(is_floating(in[0].dtype), "[", op, "] needs floating tensors, got ",
                dtype_name(in[0].dtype));
}

// Checks x [N, C, H, W] against weight [O, C / groups, kh, kw] and returns the
// output's spatial size.
std::pair<int64_t, int64_t> check_geometry(const Shape& x, const Shape& w, const ConvAttrs& a,
                                           const char* op) {
  TESSERA_CHECK(x[1] == checked_mul(w[1], a.groups, op), "[", op, "] input has ", x[1],
                " channels (shape ", shape_str(x), ") but weight ", shape_str(w),
                " with groups=", a.groups, " expects ", w[1] * a.groups,
                " (weight.shape[1] * groups)");
  TESSERA_CHECK(w[0] % a.groups == 0, "[", op, "] weight has ", w[0],
                " output channels (shape ", shape_str(w), "), not divisible by groups=", a.groups);
  TESSERA_CHECK(w[2] >= 1 && w[3] >= 1, "[", op, "] kernel size must be at least 1x1, got weight ",
                shape_str(w));
  int64_t oh = window_output_size(x[2], w[2], a.stride[0], a.padding[0], a.dilation[0], op);
  int64_t ow = window_output_size(x[3], w[3], a.stride[1], a.padding[1], a.dilation[1], op);
  TESSERA_CHECK(oh >= 1 && ow >= 1, "[", op, "] kernel ", w[2], "x", w[3], " with dilation ",
                shape_str(a.dilation), " does not fit the padded input: input ", shape_str(x),
                ", padding ", shape_str(a.padding),
                "; need H + 2*padding >= dilation*(kh-1)+1 (and the same for W)");
  return {oh, ow};
}

// ---- conv2d ---------------------------------------------------------------

MetaVector infer_conv2d(const MetaVector& in, const Attrs& attrs) {
  const char* op = "conv2d";
  check_4d(in[0], op, "input", "[N, C, H, W] (or 3-D [C, H, W] unbatched)");
  check_4d(in[1], op, "weight", "[O, C/groups, kh, kw]");
  check_same_dtype(in, op);
  ConvAttrs a(attrs);
  const Shape& x = in[0].shape;
  const Shape& w = in[1].shape;
  auto [oh, ow] = check_geometry(x, w, a, op);
  if (in.size() == 3) {
    TESSERA_CHECK(in[2].shape == Shape{w[0]}, "[conv2d] bias must have shape [", w[0],
                  "] (one value per output channel), got ", shape_str(in[2].shape));
  }
  return {{{x[0], w[0], oh, ow}, in[0].dtype, in[0].device}};
}

std::vector<SbpSignature> conv2d_sbp(const MetaVector& in, const Attrs& attrs) {
  const bool has_bias = in.size() == 3;
  auto with_bias = [has_bias](std::vector<Sbp> inputs, Sbp bias, Sbp out) {
    if (has_bias) inputs.push_back(bias);
    return SbpSignature{std::move(inputs), {out}};
  };
  std::vector<SbpSignature> signatures = {
      with_bias({split(0), kB}, kB, split(0)),
      with_bias({kPs, kB}, kPs, kPs),
      with_bias({kB, kPs}, kPs, kPs),
  };
  if (attrs.i("groups") == 1) {
    signatures.push_back(with_bias({kB, split(0)}, split(0), split(1)));
    signatures.push_back(with_bias({split(1), split(1)}, kPs, kPs));
  }
  return signatures;
}

Shape spatial(const Shape& shape) { return {shape[2], shape[3]}; }

std::vector<Tensor> conv2d_grad(const GradContext& c) {
  ConvAttrs a(c.attrs());
  const Tensor& g = c.grad_output(0);
  std::vector<Tensor> grads(c.num_inputs());
  if (c.needs_input_grad(0)) {
    grads[0] = conv2d_backward_input(g, c.input(1), spatial(c.input_meta(0).shape), a.stride,
                                     a.padding, a.dilation, a.groups);
  }
  if (c.needs_input_grad(1)) {
    grads[1] = conv2d_backward_weight(c.input(0), g, spatial(c.input_meta(1).shape), a.stride,
                                      a.padding, a.dilation, a.groups);
  }
  // Two steps: reducing the contiguous spatial dims first is much faster.
  if (c.num_inputs() == 3 && c.needs_input_grad(2)) grads[2] = sum(sum(g, {2, 3}), {0});
  return grads;
}

const OpDef& conv2d_op = register_op([] {
  OpDef def;
  def.name = "conv2d";
  def.contiguous_inputs = true;
  def.kind = OpKind::convolution;
  def.torch_name = "torch.nn.functional.conv2d";
  def.signature = "conv2d(x, weight, bias, stride, padding, dilation, groups)";
  def.infer = infer_conv2d;
  def.sbp = conv2d_sbp;
  def.grad = conv2d_grad;
  return def;
}());

// ---- conv2d_backward_input: (grad_output, weight) -> grad_input ------------

MetaVector infer_backward_input(const MetaVector& in, const Attrs& attrs) {
  const char* op = "conv2d_backward_input";
  check_4d(in[0], op, "grad_output", "[N, O, OH, OW]");
  check_4d(in[1], op, "weight", "[O, C/groups, kh, kw]");
  check_same_dtype(in, op);
  ConvAttrs a(attrs);
  const Shape& g = in[0].shape;
  const Shape& w = in[1].shape;
  const auto& hw = attrs.ints("input_size");
  Shape x = {g[0], w[1] * a.groups, hw[0], hw[1]};
  auto [oh, ow] = check_geometry(x, w, a, op);
  TESSERA_CHECK(g[1] == w[0] && g[2] == oh && g[3] == ow, "[", op, "] grad_output ",
                shape_str(g), " does not match weight ", shape_str(w), " and input size ",
                shape_str(hw), "; expected [", g[0], ", ", w[0], ", ", oh, ", ", ow, "]");
  return {{x, in[0].dtype, in[0].device}};
}

std::vector<SbpSignature> backward_input_sbp(const MetaVector&, const Attrs& attrs) {
  std::vector<SbpSignature> signatures = {
      {{split(0), kB}, {split(0)}},
      {{kPs, kB}, {kPs}},
      {{kB, kPs}, {kPs}},
  };
  if (attrs.i("groups") == 1) {
    signatures.push_back({{split(1), split(0)}, {kPs}});
    signatures.push_back({{kB, split(1)}, {split(1)}});
  }
  return signatures;
}

std::vector<Tensor> backward_input_grad(const GradContext& c) {
  ConvAttrs a(c.attrs());
  const Tensor& gg = c.grad_output(0);
  std::vector<Tensor> grads(2);
  if (c.needs_input_grad(0)) {
    grads[0] = conv2d(gg, c.input(1), {}, a.stride, a.padding, a.dilation, a.groups);
  }
  if (c.needs_input_grad(1)) {
    grads[1] = conv2d_backward_weight(gg, c.input(0), spatial(c.input_meta(1).shape), a.stride,
                                      a.padding, a.dilation, a.groups);
  }
  return grads;
}

const OpDef& backward_input_op = register_op([] {
  OpDef def;
  def.name = "conv2d_backward_input";
  def.contiguous_inputs = true;
  def.kind = OpKind::convolution;
  def.torch_name = "torch.nn.functional.conv_transpose2d (and conv2d's input gradient)";
  def.signature = "conv2d_backward_input(grad_output, weight, input_hw, stride, padding, "
                  "dilation, groups); conv_transpose2d(x, weight, bias, stride, padding, "
                  "output_padding, groups, dilation)";
  def.infer = infer_backward_input;
  def.sbp = backward_input_sbp;
  def.grad = backward_input_grad;
  return def;
}());

// ---- conv2d_backward_weight: (input, grad_output) -> grad_weight -----------

MetaVector infer_backward_weight(const MetaVector& in, const Attrs& attrs) {
  const char* op = "conv2d_backward_weight";
  check_4d(in[0], op, "input", "[N, C, H, W]");
  check_4d(in[1], op, "grad_output", "[N, O, OH, OW]");
  check_same_dtype(in, op);
  ConvAttrs a(attrs);
  const Shape& x = in[0].shape;
  const Shape& g = in[1].shape;
  const auto& khw = attrs.ints("kernel_size");
  TESSERA_CHECK(x[1] % a.groups == 0, "[", op, "] input has ", x[1],
                " channels, not divisible by groups=", a.groups);
  Shape w = {g[1], x[1] / a.groups, khw[0], khw[1]};
  auto [oh, ow] = check_geometry(x, w, a, op);
  TESSERA_CHECK(g[0] == x[0] && g[2] == oh && g[3] == ow, "[", op, "] grad_output ",
                shape_str(g), " does not match input ", shape_str(x), " and kernel size ",
                shape_str(khw), "; expected [", x[0], ", ", g[1], ", ", oh, ", ", ow, "]");
  return {{w, in[0].dtype, in[0].device}};
}

std::vector<SbpSignature> backward_weight_sbp(const MetaVector&, const Attrs& attrs) {
  std::vector<SbpSignature> signatures = {
      {{split(0), split(0)}, {kPs}},
      {{kPs, kB}, {kPs}},
      {{kB, kPs}, {kPs}},
  };
  if (attrs.i("groups") == 1) {
    signatures.push_back({{kB, split(1)}, {split(0)}});
    signatures.push_back({{split(1), kB}, {split(1)}});
  }
  return signatures;
}

std::vector<Tensor> backward_weight_grad(const GradContext& c) {
  ConvAttrs a(c.attrs());
  const Tensor& gw = c.grad_output(0);
  std::vector<Tensor> grads(2);
  if (c.needs_input_grad(0)) {
    grads[0] = conv2d_backward_input(c.input(1), gw, spatial(c.input_meta(0).shape), a.stride,
                                     a.padding, a.dilation, a.groups);
  }
  if (c.needs_input_grad(1)) {
    grads[1] = conv2d(c.input(0), gw, {}, a.stride, a.padding, a.dilation, a.groups);
  }
  return grads;
}

const OpDef& backward_weight_op = register_op([] {
  OpDef def;
  def.name = "conv2d_backward_weight";
  def.contiguous_inputs = true;
  def.kind = OpKind::convolution;
  def.torch_name = "torch.nn.grad.conv2d_weight";
  def.signature = "conv2d_backward_weight(x, grad_output, kernel_hw, stride, padding, dilation, "
                  "groups)";
  def.infer = infer_backward_weight;
  def.sbp = backward_weight_sbp;
  def.grad = backward_weight_grad;
  return def;
}());

void check_defined(const char* op, std::initializer_list<const Tensor*> tensors) {
  for (const Tensor* t : tensors) {
    TESSERA_CHECK(t->defined(), "[", op, "] got an undefined tensor");
  }
}

void check_hw(const std::vector<int64_t>& hw, const char* op, const char* name) {
  TESSERA_CHECK(hw.size() == 2 && hw[0] >= 0 && hw[1] >= 0, "[", op, "] ", name,
                " needs 2 non-negative values (height, width), got ", shape_str(hw));
}

}  // namespace

Tensor conv2d(const Tensor& x, const Tensor& weight, const Tensor& bias,
              const std::vector<int64_t>& stride, const std::vector<int64_t>& padding,
              const std::vector<int64_t>& dilation, int64_t groups) {
  check_defined("conv2d", {&x, &weight});
  if (x.dim() == 3) {
    return conv2d(x.unsqueeze(0), weight, bias, stride, padding, dilation, groups).squeeze(0);
  }
  Attrs attrs = make_attrs(stride, padding, dilation, groups, "conv2d");
  DType common = promote_types(x.dtype(), weight.dtype());
  if (bias.defined()) common = promote_types(common, bias.dtype());
  TESSERA_CHECK(common != DType::boolean, "[conv2d] does not take bool tensors");
  if (!is_floating(common)) {
    // PyTorch convolves integer tensors too (no gradient). Summed in f64:
    // exact while the sums stay below 2^53 in magnitude (PyTorch wraps at 2^63).
    const Tensor bias64 = bias.defined() ? bias.to(DType::f64) : bias;
    return conv2d(x.to(DType::f64), weight.to(DType::f64), bias64, stride, padding, dilation,
                  groups)
        .to(common);
  }
  std::vector<Tensor> inputs = {x.to(common), weight.to(common)};
  if (bias.defined()) inputs.push_back(bias.to(common));
  return call1(conv2d_op, inputs, attrs);
}

Tensor conv2d(const Tensor& x, const Tensor& weight, const Tensor& bias, int64_t stride,
              int64_t padding, int64_t dilation, int64_t groups) {
  return conv2d(x, weight, bias, {stride, stride}, {padding, padding}, {dilation, dilation},
                groups);
}

Tensor conv2d_backward_input(const Tensor& grad_output, const Tensor& weight,
                             const std::vector<int64_t>& input_hw,
                             const std::vector<int64_t>& stride,
                             const std::vector<int64_t>& padding,
                             const std::vector<int64_t>& dilation, int64_t groups) {
  const char* op = "conv2d_backward_input";
  check_defined(op, {&grad_output, &weight});
  check_hw(input_hw, op, "input_hw");
  Attrs attrs = make_attrs(stride, padding, dilation, groups, op);
  attrs.set("input_size", input_hw);
  return call1(backward_input_op, {grad_output, weight}, attrs);
}

Tensor conv2d_backward_weight(const Tensor& x, const Tensor& grad_output,
                              const std::vector<int64_t>& kernel_hw,
                              const std::vector<int64_t>& stride,
                              const std::vector<int64_t>& padding,
                              const std::vector<int64_t>& dilation, int64_t groups) {
  const char* op = "conv2d_backward_weight";
  check_defined(op, {&x, &grad_output});
  check_hw(kernel_hw, op, "kernel_hw");
  Attrs attrs = make_attrs(stride, padding, dilation, groups, op);
  attrs.set("kernel_size", kernel_hw);
  return call1(backward_weight_op, {x, grad_output}, attrs);
}

}  // namespace tessera
