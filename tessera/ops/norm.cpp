// Normalisation ops. layer_norm is a primitive whose fused kernel
// (backend/cpu/norm.cpp) also returns the per-row mean and 1/std; its
// gradient is the fused layer_norm_backward op, whose own gradient is written
// with public ops. rms_norm is a composition of public ops.

#include "tessera/ops/norm.h"

#include <limits>

#include "tessera/ops/dispatch.h"
#include "tessera/ops/elementwise.h"
#include "tessera/ops/op.h"
#include "tessera/ops/reduce.h"

namespace tessera {

namespace {

// The normalised dims [ndim - count, ndim).
Dims trailing_dims(int64_t ndim, size_t count) {
  Dims dims;
  for (int64_t d = ndim - static_cast<int64_t>(count); d < ndim; ++d) dims.push_back(d);
  return dims;
}

// Shape of the mean / rstd outputs: batch dims, then 1 per normalised dim.
Shape stats_shape(const Shape& x, size_t normalized) {
  Shape shape = x;
  for (size_t i = shape.size() - normalized; i < shape.size(); ++i) shape[i] = 1;
  return shape;
}

// Number of batch dims (those before the normalised ones) of x.
int64_t batch_dims(const TensorMeta& x, const Attrs& attrs) {
  return static_cast<int64_t>(x.shape.size() - attrs.ints("normalized_shape").size());
}

// layer_norm_backward(grad, x, mean, rstd, [weight]) -> (dx, dgamma, dbeta):
//   dx = rstd * (a - mean(a) - xhat * mean(a * xhat)),  a = grad * weight,
//   dgamma = sum over the batch of grad * xhat,  dbeta = sum of grad,
// with xhat = (x - mean) * rstd and means over the normalised dims. mean and
// rstd are treated as independent inputs here; their dependence on x is
// handled by layer_norm's gradient. This is the vector-Jacobian product of
// those formulas, for second-order gradients.
std::vector<Tensor> layer_norm_backward_grad(const GradContext& c) {
  const Attrs& attrs = c.attrs();
  const bool has_weight = attrs.b("has_weight");
  const Shape& normalized = attrs.ints("normalized_shape");
  const Tensor& g = c.input(0);
  const Tensor& x = c.input(1);
  const Tensor& mu = c.input(2);
  const Tensor& rstd = c.input(3);
  const Tensor weight = has_weight ? c.input(4) : Tensor();
  const Dims dims = trailing_dims(x.dim(), normalized.size());
  const Tensor& h = c.grad_output(0);
  // Outputs that got no gradient contribute no terms.
  const bool use_gamma = c.has_grad_output(1), use_beta = c.has_grad_output(2);
  const Tensor h_gamma = use_gamma ? c.grad_output(1) : Tensor();
  const Tensor h_beta = use_beta ? c.grad_output(2) : Tensor();

  Tensor centered = sub(x, mu);
  Tensor xhat = mul(centered, rstd);
  Tensor a = has_weight ? mul(g, weight) : g;
  Tensor a_mean = mean(a, dims, true), ax_mean = mean(mul(a, xhat), dims, true);
  Tensor scaled = mul(h, rstd);
  Tensor hx_mean = mean(mul(scaled, xhat), dims, true);
  Tensor d_a = sub(sub(scaled, mean(scaled, dims, true)), mul(xhat, hx_mean));
  Tensor d_xhat = neg(add(mul(scaled, ax_mean), mul(a, hx_mean)));
  if (use_gamma) d_xhat = add(d_xhat, mul(h_gamma, g));

  std::vector<Tensor> grads(c.num_inputs());
  if (c.needs_input_grad(0)) {
    Tensor d_g = has_weight ? mul(d_a, weight) : d_a;
    if (use_gamma) d_g = add(d_g, mul(h_gamma, xhat));
    if (use_beta) d_g = add(d_g, h_beta);
    grads[0] = d_g;
  }
  if (c.needs_input_grad(1)) grads[1] = mul(d_xhat, rstd);
  if (c.needs_input_grad(2)) grads[2] = neg(mul(sum(d_xhat, dims, true), rstd));
  if (c.needs_input_grad(3)) {
    Tensor explicit_part = mul(h, sub(sub(a, a_mean), mul(xhat, ax_mean)));
    grads[3] = add(sum(mul(d_xhat, centered), dims, true), sum(explicit_part, dims, true));
  }
  if (has_weight && c.needs_input_grad(4)) grads[4] = sum_to(mul(d_a, g), normalized);
  return grads;
}

const OpDef& layer_norm_backward_op = register_op([] {
  OpDef def;
  def.name = "layer_norm_backward";
  def.contiguous_inputs = true;  // the kernel reads dense rows
  def.kind = OpKind::reduction;
  def.torch_name = "internal";
  def.signature = "layer_norm's gradient";
  def.infer = [](const MetaVector& in, const Attrs& attrs) {
    const TensorMeta& x = in[1];
    TensorMeta param{attrs.ints("normalized_shape"), x.dtype, x.device};
    return MetaVector{x, param, param};
  };
  // Rows are independent, and the parameter gradients sum over rows. All
  // outputs are linear in grad, so partial grads give partial results.
  def.sbp = [](const MetaVector& in, const Attrs& attrs) {
    std::vector<SbpSignature> signatures;
    const Sbp partial = Sbp::partial_sum();
    for (int64_t d = 0; d < batch_dims(in[1], attrs); ++d) {
      std::vector<Sbp> inputs(in.size(), Sbp::broadcast());
      for (size_t i = 0; i < 4; ++i) inputs[i] = Sbp::split(d);
      signatures.push_back({inputs, {Sbp::split(d), partial, partial}});
    }
    std::vector<Sbp> inputs(in.size(), Sbp::broadcast());
    inputs[0] = partial;
    signatures.push_back({inputs, {partial, partial, partial}});
    return signatures;
  };
  def.kernel_dtype_input = 1;
  def.grad = layer_norm_backward_grad;
  return def;
}());

// Gradients of all three outputs: y, mean and rstd. The latter two matter for
// second order, where the recomputed forward's statistics carry gradients.
std::vector<Tensor> layer_norm_grad(const GradContext& c) {
  const Attrs& attrs = c.attrs();
  const bool has_weight = attrs.b("has_weight"), has_bias = attrs.b("has_bias");
  const Shape& normalized = attrs.ints("normalized_shape");
  const Tensor& x = c.input(0);
  Tensor mu = c.output(1), rstd = c.output(2);
  std::vector<Tensor> inputs{c.grad_output(0), x, mu, rstd};
  if (has_weight) inputs.push_back(c.input(1));
  std::vector<Tensor> parts = call(layer_norm_backward_op, inputs,
                                   {{"normalized_shape", normalized}, {"has_weight", has_weight}});
  std::vector<Tensor> grads(c.num_inputs());
  if (c.needs_input_grad(0)) {
    Tensor dx = parts[0];
    const double count = static_cast<double>(numel(normalized));
    // mean and rstd get gradients only in higher orders (the recomputed
    // forward's statistics); otherwise their terms are skipped.
    if (c.has_grad_output(1)) dx = add(dx, div(c.grad_output(1), count));
    if (c.has_grad_output(2)) {
      const Tensor& g_rstd = c.grad_output(2);
      // d rstd / dx = -rstd^3 (x - mean) / n.
      Tensor scale = div(mul(g_rstd, mul(mul(rstd, rstd), rstd)), count);
      dx = sub(dx, mul(sub(x, mu), scale));
    }
    grads[0] = dx;
  }
  if (has_weight && c.needs_input_grad(1)) grads[1] = parts[1];
  if (has_bias && c.needs_input_grad(has_weight ? 2 : 1)) grads[has_weight ? 2 : 1] = parts[2];
  return grads;
}

const OpDef& layer_norm_op = register_op([] {
  OpDef def;
  def.name = "layer_norm";
  def.contiguous_inputs = true;  // the kernel reads dense rows
  def.kind = OpKind::reduction;
  def.torch_name = "torch.nn.functional.layer_norm";
  def.signature = "layer_norm(x, normalized_shape, weight, bias, eps)";
  def.infer = [](const MetaVector& in, const Attrs& attrs) {
    const TensorMeta& x = in[0];
    TESSERA_CHECK(is_floating(x.dtype), "[layer_norm] needs a floating tensor, got ",
                  dtype_name(x.dtype));
    TensorMeta stats{stats_shape(x.shape, attrs.ints("normalized_shape").size()), x.dtype,
                     x.device};
    return MetaVector{x, stats, stats};
  };
  // Batch dims split; weight and bias, which cover the normalised dims, are
  // needed whole on every rank.
  def.sbp = [](const MetaVector& in, const Attrs& attrs) {
    std::vector<SbpSignature> signatures;
    for (int64_t d = 0; d < batch_dims(in[0], attrs); ++d) {
      std::vector<Sbp> inputs(in.size(), Sbp::broadcast());
      inputs[0] = Sbp::split(d);
      signatures.push_back({inputs, std::vector<Sbp>(3, Sbp::split(d))});
    }
    return signatures;
  };
  def.saves_outputs = true;
  def.grad = layer_norm_grad;
  return def;
}());

double machine_epsilon(DType dtype) {
  switch (dtype) {
    case DType::f64:
      return std::numeric_limits<double>::epsilon();
    case DType::f16:
      return 0.0009765625;
    case DType::bf16:
      return 0.0078125;
    default:
      return std::numeric_limits<float>::epsilon();
  }
}

// Checks that `param` (weight or bias) matches normalized_shape and x's dtype.
void check_param(const Tensor& param, const char* what, const Tensor& x, const Shape& normalized,
                 const char* op) {
  if (!param.defined()) return;
  TESSERA_CHECK(param.shape() == normalized, "[", op, "] ", what, " has shape ",
                shape_str(param.shape()), " but normalized_shape is ", shape_str(normalized),
                "; they must be equal");
  TESSERA_CHECK(param.dtype() == x.dtype(), "[", op, "] ", what, " is ", dtype_name(param.dtype()),
                " but x is ", dtype_name(x.dtype()), "; cast them to one dtype");
}

void check_input(const Tensor& x, const Shape& normalized, const char* op) {
  TESSERA_CHECK(x.defined(), "[", op, "] got an undefined tensor");
  TESSERA_CHECK(is_floating(x.dtype()), "[", op, "] needs a floating tensor, got ",
                dtype_name(x.dtype()), "; cast first (x.to(DType::f32))");
  TESSERA_CHECK(!normalized.empty(), "[", op, "] normalized_shape must have at least one dim");
  const size_t count = normalized.size();
  bool matches = count <= x.shape().size();
  for (size_t i = 0; matches && i < count; ++i) {
    matches = x.shape()[x.shape().size() - count + i] == normalized[i];
  }
  TESSERA_CHECK(matches, "[", op, "] normalized_shape ", shape_str(normalized),
                " does not match the trailing dims of x, which has shape ", shape_str(x.shape()),
                "; x.shape must end with normalized_shape");
}

}  // namespace

Tensor layer_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight,
                  const Tensor& bias, double eps) {
  check_input(x, normalized_shape, "layer_norm");
  check_param(weight, "weight", x, normalized_shape, "layer_norm");
  check_param(bias, "bias", x, normalized_shape, "layer_norm");
  std::vector<Tensor> inputs{x};
  if (weight.defined()) inputs.push_back(weight);
  if (bias.defined()) inputs.push_back(bias);
  return call(layer_norm_op, inputs,
              {{"normalized_shape", normalized_shape},
               {"eps", eps},
               {"has_weight", weight.defined()},
               {"has_bias", bias.defined()}})[0];
}

Tensor rms_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight,
                std::optional<double> eps) {
  check_input(x, normalized_shape, "rms_norm");
  check_param(weight, "weight", x, normalized_shape, "rms_norm");
  const double epsilon = eps.value_or(machine_epsilon(x.dtype()));
  Dims dims = trailing_dims(x.dim(), normalized_shape.size());
  Tensor y = mul(x, rsqrt(add(mean(mul(x, x), dims, true), epsilon)));
  return weight.defined() ? mul(y, weight) : y;
}

}  // namespace tessera
