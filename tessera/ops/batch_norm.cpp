// batch_norm as four fused primitives, split where a data-parallel run needs
// its one collective (as PyTorch's SyncBatchNorm splits it):
//   batch_norm_stats(x) -> [2, C] f64 (sum, sum of squares) per channel:
//     partial sums over a split batch, so making them whole is one
//     all-reduce of 2C values;
//   batch_norm_elemt(x, stats, [weight], [bias]) -> y, one pass;
//   backward: batch_norm_backward_reduce(grad, x, stats) -> [2, C] (sum of
//     grad, sum of grad * xhat), again partial over a split batch and made
//     whole once, then batch_norm_backward_elemt -> dx in one pass;
//   batch_norm_update_stats: the running statistics' new values.
// Out of training, stats holds the running (mean, var) rows instead.

#include "tessera/ops/batch_norm.h"

#include "tessera/core/grad_mode.h"
#include "tessera/ops/concat.h"
#include "tessera/ops/elementwise.h"
#include "tessera/ops/op.h"
#include "tessera/ops/reduce.h"

namespace tessera {

namespace {

// Per-channel signatures of an op whose `data` inputs are [N, C, *] and whose
// other inputs are per channel: a split of any dim but the channel dim
// leaves the per-channel inputs whole (B) and gives `batch_split_output`
// (the split, or partial sums for reductions); a channel split splits
// everything along its channels, `channel_axis` giving each input's channel
// dim (-1: broadcast, e.g. the f64 stats of a channel split).
std::vector<SbpSignature> channel_signatures(const TensorMeta& x, size_t num_inputs,
                                             size_t data_inputs,
                                             const std::vector<int64_t>& channel_axis,
                                             const std::vector<bool>& reduces) {
  std::vector<SbpSignature> signatures;
  const int64_t ndim = static_cast<int64_t>(x.shape.size());
  for (int64_t d = 0; d < ndim; ++d) {
    std::vector<Sbp> inputs(num_inputs, Sbp::broadcast());
    std::vector<Sbp> outputs;
    if (d == 1) {
      for (size_t i = 0; i < num_inputs; ++i) {
        inputs[i] = i < data_inputs ? Sbp::split(1) : Sbp::split(channel_axis[i]);
      }
      for (bool reduce : reduces) outputs.push_back(reduce ? Sbp::split(1) : Sbp::split(d));
    } else {
      for (size_t i = 0; i < data_inputs; ++i) inputs[i] = Sbp::split(d);
      for (bool reduce : reduces) outputs.push_back(reduce ? Sbp::partial_sum() : Sbp::split(d));
    }
    signatures.push_back({inputs, outputs});
  }
  return signatures;
}

// Channel axis of each per-channel input: [2, C] stats and reductions have
// their channels on dim 1, [C] parameters on dim 0.
std::vector<int64_t> axes(std::initializer_list<int64_t> list) { return list; }

TensorMeta stats_meta(const TensorMeta& x, DType dtype) {
  return TensorMeta{{2, x.shape.size() >= 2 ? x.shape[1] : 0}, dtype, x.device};
}

const OpDef& batch_norm_stats_op = register_op([] {
  OpDef def;
  def.name = "batch_norm_stats";
  def.contiguous_inputs = true;  // the kernel reads dense rows
  def.kind = OpKind::normalization;
  def.infer = [](const MetaVector& in, const Attrs&) {
    return MetaVector{stats_meta(in[0], DType::f64)};
  };
  def.sbp = [](const MetaVector& in, const Attrs&) {
    return channel_signatures(in[0], 1, 1, axes({1}), {true});
  };
  // Its dependence on x is part of batch_norm_elemt's gradient.
  def.differentiable = false;
  def.torch_name = "internal";
  def.signature = "batch_norm(x, running_mean, running_var, weight, bias, training=true, ...)";
  return def;
}());

const OpDef& batch_norm_update_stats_op = register_op([] {
  OpDef def;
  def.name = "batch_norm_update_stats";
  def.contiguous_inputs = true;  // the kernel reads dense rows
  def.kind = OpKind::normalization;
  def.infer = [](const MetaVector& in, const Attrs&) { return MetaVector{in[0], in[1]}; };
  def.sbp = [](const MetaVector&, const Attrs&) {
    return std::vector<SbpSignature>{
        {{Sbp::split(0), Sbp::split(0), Sbp::split(1)}, {Sbp::split(0), Sbp::split(0)}}};
  };
  def.differentiable = false;
  def.kernel_dtype_input = 0;
  def.torch_name = "internal";
  def.signature = "batch_norm(x, running_mean, running_var, weight, bias, training=true, momentum)";
  return def;
}());

const OpDef& batch_norm_backward_reduce_op = register_op([] {
  OpDef def;
  def.name = "batch_norm_backward_reduce";
  def.contiguous_inputs = true;  // the kernel reads dense rows
  def.kind = OpKind::normalization;
  def.infer = [](const MetaVector& in, const Attrs&) {
    return MetaVector{stats_meta(in[1], in[1].dtype)};
  };
  // Linear in grad: a partial grad gives partial sums.
  def.sbp = [](const MetaVector& in, const Attrs&) {
    std::vector<SbpSignature> signatures = channel_signatures(in[1], 3, 2, axes({1, 1, 1}), {true});
    signatures.push_back(
        {{Sbp::partial_sum(), Sbp::broadcast(), Sbp::broadcast()}, {Sbp::partial_sum()}});
    return signatures;
  };
  def.kernel_dtype_input = 1;
  def.differentiable = false;
  def.torch_name = "internal";
  def.signature = "batch_norm(...).backward()";
  return def;
}());

const OpDef& batch_norm_backward_elemt_op = register_op([] {
  OpDef def;
  def.name = "batch_norm_backward_elemt";
  def.contiguous_inputs = true;  // the kernel reads dense rows
  def.kind = OpKind::normalization;
  def.infer = [](const MetaVector& in, const Attrs&) { return MetaVector{in[1]}; };
  // dx is linear in (grad, reduced) together.
  def.sbp = [](const MetaVector& in, const Attrs& attrs) {
    const bool training = attrs.b("training");
    std::vector<int64_t> channel_axis{1, 1, 1};
    if (training) channel_axis.push_back(1);
    if (attrs.b("has_weight")) channel_axis.push_back(0);
    std::vector<SbpSignature> signatures =
        channel_signatures(in[1], in.size(), 2, channel_axis, {false});
    std::vector<Sbp> partial(in.size(), Sbp::broadcast());
    partial[0] = Sbp::partial_sum();
    if (training) partial[3] = Sbp::partial_sum();
    signatures.push_back({partial, {Sbp::partial_sum()}});
    return signatures;
  };
  def.kernel_dtype_input = 1;
  def.differentiable = false;
  def.torch_name = "internal";
  def.signature = "batch_norm(...).backward()";
  return def;
}());

// Makes a partial-sum global tensor whole (one all-reduce), so that the
// parameter gradients taken from it need no reduction of their own.
Tensor whole(const Tensor& t) {
  if (!t.is_global()) return t;
  std::vector<Sbp> sbps = t.nd_sbp().sbps();
  bool partial = false;
  for (Sbp& s : sbps) {
    if (s.is_partial()) {
      s = Sbp::broadcast();
      partial = true;
    }
  }
  return partial ? t.to_global(t.placement(), NdSbp(sbps)) : t;
}

std::vector<Tensor> batch_norm_elemt_grad(const GradContext& c) {
  const Attrs& attrs = c.attrs();
  const bool training = attrs.b("training");
  const bool has_weight = attrs.b("has_weight"), has_bias = attrs.b("has_bias");
  const int bias_index = has_weight ? 3 : 2;
  const Tensor& g = c.grad_output(0);
  const Tensor& x = c.input(0);
  const Tensor& stats = c.input(1);
  const bool weight_grad = has_weight && c.needs_input_grad(2);
  const bool bias_grad = has_bias && c.needs_input_grad(bias_index);
  const Attrs reduce_attrs{{"training", training}, {"count", attrs.i("count")},
                           {"eps", attrs.f("eps")}};
  Tensor reduced;
  if (training || weight_grad || bias_grad) {
    reduced = whole(call1(batch_norm_backward_reduce_op, {g, x, stats}, reduce_attrs));
  }
  std::vector<Tensor> grads(c.num_inputs());
  if (c.needs_input_grad(0)) {
    std::vector<Tensor> inputs{g, x, stats};
    if (training) inputs.push_back(reduced);
    if (has_weight) inputs.push_back(c.input(2));
    Attrs elemt_attrs = reduce_attrs;
    elemt_attrs.set("has_weight", has_weight);
    grads[0] = call1(batch_norm_backward_elemt_op, inputs, elemt_attrs);
  }
  if (weight_grad) grads[2] = reduced.select(0, 1);
  if (bias_grad) grads[bias_index] = reduced.select(0, 0);
  return grads;
}

const OpDef& batch_norm_elemt_op = register_op([] {
  OpDef def;
  def.name = "batch_norm_elemt";
  def.contiguous_inputs = true;  // the kernel reads dense rows
  def.kind = OpKind::normalization;
  def.infer = [](const MetaVector& in, const Attrs&) { return MetaVector{in[0]}; };
  def.sbp = [](const MetaVector& in, const Attrs&) {
    std::vector<int64_t> channel_axis{1, 1};
    for (size_t i = 2; i < in.size(); ++i) channel_axis.push_back(0);
    return channel_signatures(in[0], in.size(), 1, channel_axis, {false});
  };
  def.grad = batch_norm_elemt_grad;
  def.torch_name = "torch.nn.functional.batch_norm";
  def.signature =
      "batch_norm(x, running_mean, running_var, weight, bias, training, momentum, eps)";
  return def;
}());

void check_channel_tensor(const Tensor& t, const char* what, const Tensor& x, bool required,
                          bool training) {
  if (!t.defined()) {
    TESSERA_CHECK(!required, "[batch_norm] ", what, " must be defined in evaluation mode",
                  training ? "" : " (training=false)");
    return;
  }
  const int64_t channels = x.size(1);
  TESSERA_CHECK(t.dim() == 1 && t.size(0) == channels, "[batch_norm] ", what, " has shape ",
                shape_str(t.shape()), " but x, of shape ", shape_str(x.shape()), ", has ",
                channels, " channels (dim 1); it must be [", channels, "]");
  TESSERA_CHECK(t.dtype() == x.dtype(), "[batch_norm] ", what, " is ", dtype_name(t.dtype()),
                " but x is ", dtype_name(x.dtype()), "; cast them to one dtype");
}

}  // namespace

namespace {

// The per-channel batch normalisation of x [N, C, *] (checked by the
// caller), without batch_norm's one-value-per-channel check.
Tensor normalize(const Tensor& x, const Tensor& running_mean, const Tensor& running_var,
                 const Tensor& weight, const Tensor& bias, bool training, double momentum,
                 double eps) {
  const int64_t count = x.numel() / x.size(1);
  Tensor stats;
  if (training) {
    stats = whole(call1(batch_norm_stats_op, {x}));
    if (running_mean.defined() && running_var.defined() && count > 0) {
      NoGradGuard no_grad;
      std::vector<Tensor> updated =
          call(batch_norm_update_stats_op, {running_mean, running_var, stats},
               {{"count", count}, {"momentum", momentum}});
      Tensor(running_mean).copy_(updated[0]);
      Tensor(running_var).copy_(updated[1]);
    }
  } else {
    NoGradGuard no_grad;
    stats = stack({running_mean, running_var});
  }
  std::vector<Tensor> inputs{x, stats};
  if (weight.defined()) inputs.push_back(weight);
  if (bias.defined()) inputs.push_back(bias);
  return call1(batch_norm_elemt_op, inputs,
               {{"training", training},
                {"count", count},
                {"eps", eps},
                {"has_weight", weight.defined()},
                {"has_bias", bias.defined()}});
}

// weight [C] as [C, 1, ...] for broadcasting against x [N, C, *].
Tensor per_channel(const Tensor& t, const Tensor& x) {
  Shape shape(static_cast<size_t>(x.dim() - 1), 1);
  shape[0] = t.numel();
  return t.reshape(shape);
}

// t [C] repeated for each of the n samples: [n * C].
Tensor repeat_per_sample(const Tensor& t, int64_t n) {
  if (!t.defined()) return t;
  return t.reshape({1, t.numel()}).expand({n, t.numel()}).contiguous().reshape({n * t.numel()});
}

}  // namespace

Tensor batch_norm(const Tensor& x, const Tensor& running_mean, const Tensor& running_var,
                  const Tensor& weight, const Tensor& bias, bool training, double momentum,
                  double eps) {
  TESSERA_CHECK(x.defined(), "[batch_norm] got an undefined tensor");
  TESSERA_CHECK(is_floating(x.dtype()), "[batch_norm] needs a floating tensor, got ",
                dtype_name(x.dtype()), "; cast first (x.to(DType::f32))");
  if (x.numel() == 0) {
    // PyTorch returns x * weight[0] + bias[0] here, checking nothing else.
    Tensor y = x.clone();
    if (weight.defined()) y = mul(y, weight.select(0, 0));
    if (bias.defined()) y = add(y, bias.select(0, 0));
    return y;
  }
  TESSERA_CHECK(x.dim() >= 2, "[batch_norm] needs an [N, C, *] input, got shape ",
                shape_str(x.shape()));
  check_channel_tensor(running_mean, "running_mean", x, !training, training);
  check_channel_tensor(running_var, "running_var", x, !training, training);
  check_channel_tensor(weight, "weight", x, false, training);
  check_channel_tensor(bias, "bias", x, false, training);
  const int64_t count = x.numel() / x.size(1);
  TESSERA_CHECK(!training || count != 1,
                "[batch_norm] expected more than 1 value per channel when training, got input "
                "of shape ",
                shape_str(x.shape()));
  return normalize(x, running_mean, running_var, weight, bias, training, momentum, eps);
}

Tensor group_norm(const Tensor& x, int64_t num_groups, const Tensor& weight, const Tensor& bias,
                  double eps) {
  TESSERA_CHECK(x.defined(), "[group_norm] got an undefined tensor");
  TESSERA_CHECK(is_floating(x.dtype()), "[group_norm] needs a floating tensor, got ",
                dtype_name(x.dtype()), "; cast first (x.to(DType::f32))");
  TESSERA_CHECK(x.dim() >= 2, "[group_norm] expected at least 2 dims ([N, C, *]), got shape ",
                shape_str(x.shape()));
  const int64_t n = x.size(0), channels = x.size(1);
  TESSERA_CHECK(num_groups > 0 && channels % num_groups == 0, "[group_norm] the ", channels,
                " channels of x (shape ", shape_str(x.shape()), ") must be divisible by num_groups=",
                num_groups);
  for (const auto& [param, what] : {std::pair{&weight, "weight"}, std::pair{&bias, "bias"}}) {
    if (!param->defined()) continue;
    TESSERA_CHECK(param->dim() == 1 && param->size(0) == channels, "[group_norm] ", what,
                  " has shape ", shape_str(param->shape()), " but x has ", channels,
                  " channels; it must be [", channels, "]");
    TESSERA_CHECK(param->dtype() == x.dtype(), "[group_norm] ", what, " is ",
                  dtype_name(param->dtype()), " but x is ", dtype_name(x.dtype()));
  }
  Tensor y = x;
  if (x.numel() > 0) {
    // The (sample, group) pairs are the channels of one batch_norm.
    const int64_t per_group = x.numel() / (n * num_groups);
    Tensor grouped = x.reshape({1, n * num_groups, per_group});
    y = normalize(grouped, {}, {}, {}, {}, true, 0.0, eps).reshape(x.shape());
  } else {
    y = x.clone();
  }
  if (weight.defined()) y = mul(y, per_channel(weight, x));
  if (bias.defined()) y = add(y, per_channel(bias, x));
  return y;
}

Tensor instance_norm(const Tensor& x, const Tensor& running_mean, const Tensor& running_var,
                     const Tensor& weight, const Tensor& bias, bool use_input_stats,
                     double momentum, double eps) {
  TESSERA_CHECK(x.defined(), "[instance_norm] got an undefined tensor");
  TESSERA_CHECK(x.dim() >= 2, "[instance_norm] expected an [N, C, *] input, got shape ",
                shape_str(x.shape()));
  int64_t spatial = 1;
  for (int64_t d = 2; d < x.dim(); ++d) spatial *= x.size(d);
  TESSERA_CHECK(!use_input_stats || spatial != 1,
                "[instance_norm] expected more than 1 spatial element when training, got input "
                "of shape ",
                shape_str(x.shape()));
  const int64_t n = x.size(0), channels = x.size(1);
  // As PyTorch: one batch_norm over [1, N * C, *] with the parameters and
  // running statistics repeated per sample.
  Shape flat = x.shape();
  flat.erase(flat.begin());
  flat[0] = n * channels;
  flat.insert(flat.begin(), 1);
  Tensor mean_repeated, var_repeated;
  {
    NoGradGuard no_grad;
    mean_repeated = repeat_per_sample(running_mean, n);
    var_repeated = repeat_per_sample(running_var, n);
  }
  Tensor y = batch_norm(x.contiguous().reshape(flat), mean_repeated, var_repeated,
                        repeat_per_sample(weight, n), repeat_per_sample(bias, n), use_input_stats,
                        momentum, eps);
  if (use_input_stats && x.numel() > 0) {
    NoGradGuard no_grad;
    if (running_mean.defined()) {
      Tensor(running_mean).copy_(mean(mean_repeated.reshape({n, channels}), {0}));
    }
    if (running_var.defined()) {
      Tensor(running_var).copy_(mean(var_repeated.reshape({n, channels}), {0}));
    }
  }
  return y.reshape(x.shape());
}

}  // namespace tessera
