// Losses. cross_entropy is a primitive with a fused log-softmax + NLL kernel
// (backend/cpu/loss.cpp); its gradient is the fused cross_entropy_backward
// op, whose own gradient is written with public ops. nll_loss and mse_loss
// are compositions of public ops.

#include "tessera/ops/loss.h"

#include "tessera/ops/creation.h"
#include "tessera/ops/elementwise.h"
#include "tessera/ops/index.h"
#include "tessera/ops/op.h"
#include "tessera/ops/reduce.h"
#include "tessera/ops/softmax.h"

namespace tessera {

namespace {

void check_reduction(const std::string& reduction, const char* op) {
  TESSERA_CHECK(reduction == "mean" || reduction == "sum" || reduction == "none", "[", op,
                "] reduction='", reduction, "' is not valid; use \"mean\", \"sum\" or \"none\"");
}

// Shape [1, C, 1, ...] that lines a [C] tensor up with the class dim.
Shape class_shape(int64_t ndim, int64_t classes) {
  Shape shape(static_cast<size_t>(ndim), 1);
  shape[1] = classes;
  return shape;
}

// total / divisor for a "mean" reduction. A global divisor (partial over the
// ranks' samples) is made whole first: one scalar all-reduce, after which the
// division keeps the total partial, so neither the loss nor its gradient
// moves any sample between ranks.
Tensor mean_of_sum(const Tensor& total, const Tensor& divisor) {
  if (!divisor.is_global()) return div(total, divisor);
  const Placement& placement = divisor.placement();
  return div(total, divisor.to_global(placement, NdSbp::broadcast(placement.ndim())));
}

// `local`, which every rank builds alike, as a broadcast tensor on `like`'s
// placement when `like` is global (no communication needed); else as is.
Tensor broadcast_like(const Tensor& local, const Tensor& like) {
  if (!like.is_global()) return local;
  const Placement& placement = like.placement();
  return make_global(like.local_shard().defined() ? local : Tensor(), local.shape(),
                     local.dtype(), placement, NdSbp::broadcast(placement.ndim()));
}

// Bool [N, C, d1...]: true at each sample's target class.
Tensor one_hot_mask(const Tensor& target, int64_t ndim, int64_t classes) {
  Tensor ids = broadcast_like(arange(classes).reshape(class_shape(ndim, classes)), target);
  return eq(target.unsqueeze(1), ids);
}

// For cross_entropy_backward's inputs (grad, logits, target, [weight]): the
// smoothed, weighted target distribution B = w * ((1 - e) onehot + e / C) of
// shape [N, C, d1...], and the per-sample factor valid / divisor (divisor:
// the summed counted weight for "mean", else 1) of shape [N, d1...].
struct TargetTerms {
  Tensor dist;
  Tensor factor;
};

TargetTerms target_terms(const GradContext& c) {
  const Attrs& attrs = c.attrs();
  const Tensor& logits = c.input(1);
  const Tensor& target = c.input(2);
  const DType dtype = logits.dtype();
  const int64_t ndim = logits.dim(), classes = logits.shape()[1];
  const double smoothing = attrs.f("label_smoothing");
  Tensor hot = one_hot_mask(target, ndim, classes);
  Tensor valid = cast(ne(target, attrs.i("ignore_index")), dtype);
  TargetTerms terms{add(mul(cast(hot, dtype), 1.0 - smoothing), smoothing / classes), valid};
  Tensor class_weight;
  if (attrs.b("has_weight")) {
    class_weight = c.input(3).reshape(class_shape(ndim, classes));
    terms.dist = mul(terms.dist, class_weight);
  }
  if (attrs.get<std::string>("reduction") == "mean") {
    Tensor counted = valid;
    if (class_weight.defined()) {
      counted = mul(valid, sum(where(hot, class_weight, zeros_like(class_weight)), {1}));
    }
    terms.factor = div(valid, sum(counted));
  }
  return terms;
}

// cross_entropy_backward(grad, logits, target, [weight]) -> dlogits
//   = grad * factor * (softmax(logits) * A - B),  A = sum(B, class dim),
// linear in grad. Its vector-Jacobian product, for second order: through
// softmax for the logits, and the same expression contracted with the
// upstream gradient for grad. target and weight get none (as in PyTorch).
std::vector<Tensor> cross_entropy_backward_grad(const GradContext& c) {
  std::vector<Tensor> grads(c.num_inputs());
  const Tensor& g = c.input(0);
  const Tensor& logits = c.input(1);
  const Tensor& h = c.grad_output(0);
  TargetTerms terms = target_terms(c);
  Tensor total = sum(terms.dist, {1}, true);
  Tensor probs = softmax(logits, 1);
  Tensor factor = terms.factor.unsqueeze(1);
  if (c.needs_input_grad(0)) {
    Tensor per_sample = sum(mul(h, mul(sub(mul(probs, total), terms.dist), factor)), {1});
    grads[0] = g.dim() == 0 ? sum(per_sample) : per_sample;
  }
  if (c.needs_input_grad(1)) {
    Tensor coef = mul(mul(factor, g.dim() == 0 ? g : g.unsqueeze(1)), total);
    Tensor softmax_vjp = mul(probs, sub(h, sum(mul(h, probs), {1}, true)));
    grads[1] = mul(softmax_vjp, coef);
  }
  return grads;
}

const OpDef& cross_entropy_backward_op = register_op([] {
  OpDef def;
  def.name = "cross_entropy_backward";
  def.contiguous_inputs = true;  // the kernel reads dense rows
  def.torch_name = "internal";
  def.signature = "cross_entropy's gradient";
  def.kernel_dtype_input = 1;
  def.infer = [](const MetaVector& in, const Attrs&) { return MetaVector{in[1]}; };
  // Samples split as in the forward (grad split with them when it is per
  // sample, whole otherwise); "mean" needs the global divisor. Linear in
  // grad, so a partial grad gives a partial result.
  def.sbp = [](const MetaVector& in, const Attrs& attrs) {
    std::vector<SbpSignature> signatures;
    const std::string& reduction = attrs.get<std::string>("reduction");
    for (int64_t d = 0; reduction != "mean" && d < static_cast<int64_t>(in[1].shape.size()); ++d) {
      if (d == 1) continue;
      const int64_t target_axis = d == 0 ? 0 : d - 1;
      std::vector<Sbp> inputs(in.size(), Sbp::broadcast());
      inputs[0] = reduction == "none" ? Sbp::split(target_axis) : Sbp::broadcast();
      inputs[1] = Sbp::split(d);
      inputs[2] = Sbp::split(target_axis);
      signatures.push_back({inputs, {Sbp::split(d)}});
    }
    std::vector<Sbp> inputs(in.size(), Sbp::broadcast());
    inputs[0] = Sbp::partial_sum();
    signatures.push_back({inputs, {Sbp::partial_sum()}});
    return signatures;
  };
  def.grad = cross_entropy_backward_grad;
  return def;
}());

std::vector<Tensor> cross_entropy_grad(const GradContext& c) {
  std::vector<Tensor> grads(c.num_inputs());
  if (!c.needs_input_grad(0)) return grads;
  std::vector<Tensor> inputs{c.grad_output(0), c.input(0), c.input(1)};
  if (c.attrs().b("has_weight")) inputs.push_back(c.input(2));
  grads[0] = call1(cross_entropy_backward_op, inputs, c.attrs());
  return grads;
}

const OpDef& cross_entropy_op = register_op([] {
  OpDef def;
  def.name = "cross_entropy";
  def.contiguous_inputs = true;  // the kernel reads dense rows
  def.torch_name = "torch.nn.functional.cross_entropy, torch.nn.functional.nll_loss";
  def.signature =
      "cross_entropy(logits, target, weight, ignore_index, reduction, label_smoothing), "
      "nll_loss(log_probs, target, weight, ignore_index, reduction)";
  def.infer = [](const MetaVector& in, const Attrs& attrs) {
    const TensorMeta& logits = in[0];
    TESSERA_CHECK(is_floating(logits.dtype) && logits.shape.size() >= 2, "[cross_entropy] ",
                  "logits must be floating with shape [N, C, ...], got ", shape_str(logits.shape),
                  " (", dtype_name(logits.dtype), ")");
    TESSERA_CHECK(in[1].dtype == DType::i64, "[cross_entropy] target must be i64, got ",
                  dtype_name(in[1].dtype));
    Shape out;
    if (attrs.get<std::string>("reduction") == "none") out = in[1].shape;
    return MetaVector{{out, logits.dtype, logits.device}};
  };
  // Samples are independent: split the batch or a spatial dim of logits and
  // target together. Per-sample losses stay split and their sum becomes a
  // partial sum; "mean" divides by a global total, so it has no split.
  def.sbp = [](const MetaVector& in, const Attrs& attrs) {
    std::vector<SbpSignature> signatures;
    const std::string& reduction = attrs.get<std::string>("reduction");
    if (reduction == "mean") return signatures;
    for (int64_t d = 0; d < static_cast<int64_t>(in[0].shape.size()); ++d) {
      if (d == 1) continue;
      const int64_t target_axis = d == 0 ? 0 : d - 1;
      std::vector<Sbp> inputs(in.size(), Sbp::broadcast());
      inputs[0] = Sbp::split(d);
      inputs[1] = Sbp::split(target_axis);
      Sbp out = reduction == "none" ? Sbp::split(target_axis) : Sbp::partial_sum();
      signatures.push_back({inputs, {out}});
    }
    return signatures;
  };
  def.grad = cross_entropy_grad;
  return def;
}());

// Logits / log-probabilities [N, C, ...] and target [N, ...] checked; an
// unbatched [C] / [] pair gains a batch dim of 1 (`unbatched` set).
void check_classification(const char* op, Tensor& input, Tensor& target, const Tensor& weight,
                          const std::string& reduction, bool& unbatched) {
  check_reduction(reduction, op);
  TESSERA_CHECK(input.defined() && target.defined(), "[", op, "] got an undefined tensor");
  TESSERA_CHECK(is_floating(input.dtype()), "[", op, "] input must be floating, got ",
                dtype_name(input.dtype()), " of shape ", shape_str(input.shape()));
  TESSERA_CHECK(is_integral(target.dtype()), "[", op,
                "] target must hold class indices (i64), got ", dtype_name(target.dtype()));
  if (target.dtype() != DType::i64) target = target.to(DType::i64);
  unbatched = input.dim() == 1 && target.dim() == 0;
  if (unbatched) {
    input = input.unsqueeze(0);
    target = target.unsqueeze(0);
  }
  TESSERA_CHECK(input.dim() >= 2, "[", op, "] input must have shape [N, C, d1...] or [C], got ",
                shape_str(input.shape()));
  Shape expected = input.shape();
  expected.erase(expected.begin() + 1);
  TESSERA_CHECK(target.shape() == expected, "[", op, "] target has shape ",
                shape_str(target.shape()), " but input has shape ", shape_str(input.shape()),
                "; target must have shape ", shape_str(expected), " (input without the class dim)");
  if (weight.defined()) {
    TESSERA_CHECK(weight.shape() == Shape{input.shape()[1]}, "[", op, "] weight has shape ",
                  shape_str(weight.shape()), " but input has ", input.shape()[1],
                  " classes; weight must have shape [", input.shape()[1], "]");
    TESSERA_CHECK(weight.dtype() == input.dtype(), "[", op, "] weight is ",
                  dtype_name(weight.dtype()), " but input is ", dtype_name(input.dtype()),
                  "; cast them to one dtype");
  }
}

Tensor reduce_loss(const Tensor& losses, const std::string& reduction) {
  if (reduction == "sum") return sum(losses);
  if (reduction == "mean") return mean(losses);
  return losses;
}

}  // namespace

namespace {

// cross_entropy against class probabilities `target` of the logits' shape:
// -sum_c weight_c t_c log_softmax(logits)_c per sample, t smoothed towards
// the uniform distribution; "mean" divides by the sample count (not the
// weights), and ignore_index does not apply (as torch).
Tensor cross_entropy_probabilities(const Tensor& logits, const Tensor& target,
                                   const Tensor& weight, const std::string& reduction,
                                   double label_smoothing) {
  check_reduction(reduction, "cross_entropy");
  TESSERA_CHECK(logits.defined(), "[cross_entropy] got an undefined tensor");
  TESSERA_CHECK(is_floating(logits.dtype()), "[cross_entropy] input must be floating, got ",
                dtype_name(logits.dtype()), " of shape ", shape_str(logits.shape()));
  TESSERA_CHECK(logits.dim() >= 1, "[cross_entropy] input must have shape [N, C, d1...] or [C], ",
                "got ", shape_str(logits.shape()));
  TESSERA_CHECK(target.shape() == logits.shape(), "[cross_entropy] class-probability target has ",
                "shape ", shape_str(target.shape()), " but input has shape ",
                shape_str(logits.shape()), "; they must be the same (or pass class indices)");
  const int64_t class_dim = logits.dim() == 1 ? 0 : 1;
  const int64_t classes = logits.shape()[static_cast<size_t>(class_dim)];
  if (weight.defined()) {
    TESSERA_CHECK(weight.shape() == Shape{classes}, "[cross_entropy] weight has shape ",
                  shape_str(weight.shape()), " but input has ", classes,
                  " classes; weight must have shape [", classes, "]");
  }
  Tensor dist = target;
  if (label_smoothing > 0.0) {
    dist = add(mul(dist, 1.0 - label_smoothing), label_smoothing / static_cast<double>(classes));
  }
  Tensor terms = mul(log_softmax(logits, class_dim), dist);
  if (weight.defined()) {
    terms = mul(terms, logits.dim() == 1 ? weight
                                         : weight.reshape(class_shape(logits.dim(), classes)));
  }
  Tensor losses = neg(sum(terms, {class_dim}));
  if (reduction == "none") return losses;
  if (reduction == "sum") return sum(losses);
  return mean(losses);
}

}  // namespace

Tensor cross_entropy(const Tensor& logits, const Tensor& target, const Tensor& weight,
                     int64_t ignore_index, const std::string& reduction, double label_smoothing) {
  TESSERA_CHECK(label_smoothing >= 0.0 && label_smoothing <= 1.0,
                "[cross_entropy] label_smoothing must be in [0, 1], got ", label_smoothing);
  if (target.defined() && is_floating(target.dtype())) {
    return cross_entropy_probabilities(logits, target, weight, reduction, label_smoothing);
  }
  Tensor input = logits, labels = target;
  bool unbatched = false;
  check_classification("cross_entropy", input, labels, weight, reduction, unbatched);
  std::vector<Tensor> inputs{input, labels};
  if (weight.defined()) inputs.push_back(weight);
  // A mean is the summed loss over the summed sample weights. On global
  // tensors both sums stay with the ranks' own samples, so no rank gathers
  // the batch; local code takes the same form, so a traced local step (graph
  // mode, the planner's plans) is the step global execution runs.
  const bool split_mean = reduction == "mean";
  Tensor loss = call1(cross_entropy_op, inputs,
                      {{"ignore_index", ignore_index},
                       {"reduction", split_mean ? std::string("sum") : reduction},
                       {"label_smoothing", label_smoothing},
                       {"has_weight", weight.defined()}});
  if (split_mean) {
    const Tensor valid = ne(labels, ignore_index);
    Tensor sample_weight = cast(valid, input.dtype());
    if (weight.defined()) {
      const Tensor safe_labels = where(valid, labels, zeros_like(labels));
      const Tensor picked = embedding(weight.reshape({weight.numel(), 1}), safe_labels);
      sample_weight = mul(sample_weight, picked.squeeze(-1));
    }
    return mean_of_sum(loss, sum(sample_weight));
  }
  return unbatched && reduction == "none" ? loss.squeeze(0) : loss;
}

Tensor nll_loss(const Tensor& log_probs, const Tensor& target, const Tensor& weight,
                int64_t ignore_index, const std::string& reduction) {
  Tensor input = log_probs, labels = target;
  bool unbatched = false;
  check_classification("nll_loss", input, labels, weight, reduction, unbatched);
  const int64_t classes = input.shape()[1];
  // Each rank checks the labels it holds (a global target is not gathered).
  const Tensor held = labels.local_shard();
  if (held.defined() && held.numel() > 0) {
    for (int64_t value : held.to_vector<int64_t>()) {
      TESSERA_CHECK(value == ignore_index || (value >= 0 && value < classes), "[nll_loss] target ",
                    value, " is out of range for ", classes, " classes; valid targets are 0..",
                    classes - 1, " or ignore_index (", ignore_index, ")");
    }
  }
  // Selecting with where (not multiplying by a one-hot) keeps -inf entries of
  // other classes from turning into NaN.
  Tensor hot = one_hot_mask(labels, input.dim(), classes);
  Tensor valid = ne(labels, ignore_index);
  Tensor picked = sum(where(hot, input, zeros_like(input)), {1});
  Tensor sample_weight = ones_like(picked);
  if (weight.defined()) {
    Tensor class_weight = weight.reshape(class_shape(input.dim(), classes));
    sample_weight = sum(where(hot, class_weight, zeros_like(class_weight)), {1});
  }
  sample_weight = where(valid, sample_weight, zeros_like(sample_weight));
  Tensor losses = where(valid, neg(mul(picked, sample_weight)), zeros_like(picked));
  if (reduction == "none") return unbatched ? losses.squeeze(0) : losses;
  if (reduction == "sum") return sum(losses);
  return mean_of_sum(sum(losses), sum(sample_weight));
}

Tensor mse_loss(const Tensor& a, const Tensor& b, const std::string& reduction) {
  check_reduction(reduction, "mse_loss");
  TESSERA_CHECK(a.defined() && b.defined(), "[mse_loss] got an undefined tensor");
  TESSERA_CHECK(is_floating(a.dtype()) || is_floating(b.dtype()),
                "[mse_loss] needs floating inputs, got ", dtype_name(a.dtype()), " and ",
                dtype_name(b.dtype()));
  broadcast_shapes(a.shape(), b.shape(), "mse_loss");
  Tensor diff = sub(a, b);
  return reduce_loss(mul(diff, diff), reduction);
}

}  // namespace tessera
