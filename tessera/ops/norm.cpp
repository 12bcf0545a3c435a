// Normalisation ops. layer_norm is a primitive whose fused kernel
// (backend/cpu/norm.cpp) also returns the per-row mean and 1/std, which its
// gradient reuses; rms_norm is a composition of public ops.

#include "tessera/ops/norm.h"

#include <limits>

#include "tessera/ops/elementwise.h"
#include "tessera/ops/op.h"
#include "tessera/ops/reduce.h"

namespace tessera {

namespace {

// The normalised dims [axis, ndim) of a tensor of rank ndim.
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

// True for a constant zero tensor (the gradient of an unused output).
bool all_zero(const Tensor& t) {
  return !t.requires_grad() && (t.numel() == 0 || max(abs(t)).item<double>() == 0.0);
}

double machine_epsilon(DType dtype) {
  switch (dtype) {
    case DType::f64: return std::numeric_limits<double>::epsilon();
    case DType::f16: return 0.0009765625;
    case DType::bf16: return 0.0078125;
    default: return std::numeric_limits<float>::epsilon();
  }
}

// Gradients of all three outputs: y, mean and rstd. The latter two matter for
// second order, where the recomputed forward's statistics carry gradients.
std::vector<Tensor> layer_norm_grad(const GradContext& c) {
  const Attrs& attrs = c.attrs();
  const bool has_weight = attrs.b("has_weight"), has_bias = attrs.b("has_bias");
  const Tensor& x = c.input(0);
  const Dims dims = trailing_dims(x.dim(), attrs.ints("normalized_shape").size());
  const double count = static_cast<double>(numel(attrs.ints("normalized_shape")));
  Tensor mu = c.output(1), rstd = c.output(2);
  Tensor xhat = mul(sub(x, mu), rstd);
  const Tensor& g = c.grad_output(0);

  std::vector<Tensor> grads(c.num_inputs());
  if (c.needs_input_grad(0)) {
    Tensor gy = has_weight ? mul(g, c.input(1)) : g;
    Tensor centered = sub(gy, mean(gy, dims, true));
    Tensor dx = mul(sub(centered, mul(xhat, mean(mul(gy, xhat), dims, true))), rstd);
    const Tensor& g_mean = c.grad_output(1);
    const Tensor& g_rstd = c.grad_output(2);
    if (!all_zero(g_mean)) dx = add(dx, div(g_mean, count));
    if (!all_zero(g_rstd)) {
      // d rstd / dx = -rstd^3 (x - mean) / n = -rstd^2 xhat / n.
      dx = sub(dx, mul(xhat, div(mul(g_rstd, mul(rstd, rstd)), count)));
    }
    grads[0] = dx;
  }
  const Shape& normalized = attrs.ints("normalized_shape");
  if (has_weight && c.needs_input_grad(1)) grads[1] = sum_to(mul(g, xhat), normalized);
  if (has_bias && c.needs_input_grad(has_weight ? 2 : 1)) {
    grads[has_weight ? 2 : 1] = sum_to(g, normalized);
  }
  return grads;
}

const OpDef& layer_norm_op = register_op([] {
  OpDef def;
  def.name = "layer_norm";
  def.infer = [](const std::vector<TensorMeta>& in, const Attrs& attrs) {
    const TensorMeta& x = in[0];
    TESSERA_CHECK(is_floating(x.dtype), "[layer_norm] needs a floating tensor, got ",
                  dtype_name(x.dtype));
    size_t count = attrs.ints("normalized_shape").size();
    TensorMeta stats{stats_shape(x.shape, count), x.dtype, x.device};
    return std::vector<TensorMeta>{x, stats, stats};
  };
  // Batch dims split; weight and bias, which cover the normalised dims, are
  // needed whole on every rank.
  def.sbp = [](const std::vector<TensorMeta>& in, const Attrs& attrs) {
    std::vector<SbpSignature> signatures;
    const int64_t axis = static_cast<int64_t>(in[0].shape.size() -
                                              attrs.ints("normalized_shape").size());
    for (int64_t d = 0; d < axis; ++d) {
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
