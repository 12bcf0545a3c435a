// Elementwise losses, compositions of public ops (their gradients, SBP and
// degenerate shapes come with those ops).

#include "tessera/ops/elementwise_loss.h"

#include <algorithm>

#include "tessera/ops/creation.h"
#include "tessera/ops/elementwise.h"
#include "tessera/ops/reduce.h"

namespace tessera {

namespace {

// The checks every elementwise loss shares: defined floating operands,
// a valid reduction ("batchmean" only where allowed) and, unless
// `same_shape`, shapes that broadcast; with `same_shape`, equal shapes.
void check_pointwise_loss(const char* op, const Tensor& input, const Tensor& target,
                          const std::string& reduction, bool same_shape = false,
                          bool batchmean = false) {
  TESSERA_CHECK(input.defined() && target.defined(), "[", op, "] got an undefined tensor");
  TESSERA_CHECK(reduction == "mean" || reduction == "sum" || reduction == "none" ||
                    (batchmean && reduction == "batchmean"),
                "[", op, "] reduction='", reduction, "' is not valid; use \"mean\", \"sum\"",
                batchmean ? ", \"none\" or \"batchmean\"" : " or \"none\"");
  TESSERA_CHECK(is_floating(input.dtype()) && is_floating(target.dtype()), "[", op,
                "] input and target must be floating, got ", dtype_name(input.dtype()), " and ",
                dtype_name(target.dtype()));
  if (same_shape) {
    TESSERA_CHECK(input.shape() == target.shape(), "[", op, "] target has shape ",
                  shape_str(target.shape()), " but input has shape ", shape_str(input.shape()),
                  "; they must be the same");
  } else {
    broadcast_shapes(input.shape(), target.shape(), op);
  }
}

// An optional weight must be floating and broadcast to `shape`.
void check_loss_weight(const char* op, const char* name, const Tensor& weight, const Shape& shape) {
  if (!weight.defined()) return;
  TESSERA_CHECK(is_floating(weight.dtype()), "[", op, "] ", name, " must be floating, got ",
                dtype_name(weight.dtype()));
  TESSERA_CHECK(broadcast_shapes(weight.shape(), shape, op) == shape, "[", op, "] ", name,
                " of shape ", shape_str(weight.shape()), " does not broadcast to the input's ",
                shape_str(shape));
}

Tensor reduce_pointwise_loss(const Tensor& losses, const std::string& reduction) {
  if (reduction == "sum") return sum(losses);
  if (reduction == "mean") return mean(losses);
  if (reduction == "batchmean") {
    return losses.dim() == 0 ? sum(losses) : div(sum(losses), losses.shape()[0]);
  }
  return losses;
}

}  // namespace

Tensor l1_loss(const Tensor& input, const Tensor& target, const std::string& reduction) {
  check_pointwise_loss("l1_loss", input, target, reduction);
  return reduce_pointwise_loss(abs(sub(input, target)), reduction);
}

Tensor smooth_l1_loss(const Tensor& input, const Tensor& target, const std::string& reduction,
                      double beta) {
  check_pointwise_loss("smooth_l1_loss", input, target, reduction);
  TESSERA_CHECK(beta >= 0.0, "[smooth_l1_loss] beta must be >= 0, got ", beta);
  Tensor d = abs(sub(input, target));
  if (beta == 0.0) return reduce_pointwise_loss(d, reduction);
  Tensor losses = where(lt(d, beta), mul(mul(d, d), 0.5 / beta), sub(d, 0.5 * beta));
  return reduce_pointwise_loss(losses, reduction);
}

Tensor huber_loss(const Tensor& input, const Tensor& target, const std::string& reduction,
                  double delta) {
  check_pointwise_loss("huber_loss", input, target, reduction);
  TESSERA_CHECK(delta > 0.0, "[huber_loss] delta must be > 0, got ", delta);
  Tensor d = abs(sub(input, target));
  Tensor losses = where(lt(d, delta), mul(mul(d, d), 0.5), mul(sub(d, 0.5 * delta), delta));
  return reduce_pointwise_loss(losses, reduction);
}

Tensor kl_div(const Tensor& input, const Tensor& target, const std::string& reduction,
              bool log_target) {
  check_pointwise_loss("kl_div", input, target, reduction, false, true);
  Tensor losses;
  if (log_target) {
    losses = mul(exp(target), sub(target, input));
  } else {
    // xlogy(target, target) - target * input: 0 where target is 0, NaN
    // where it is negative (as torch).
    Tensor entropy = where(eq(target, 0.0), zeros_like(target), mul(target, log(target)));
    losses = sub(entropy, mul(target, input));
  }
  return reduce_pointwise_loss(losses, reduction);
}

Tensor binary_cross_entropy(const Tensor& input, const Tensor& target, const Tensor& weight,
                            const std::string& reduction) {
  check_pointwise_loss("binary_cross_entropy", input, target, reduction, true);
  check_loss_weight("binary_cross_entropy", "weight", weight, input.shape());
  // Each rank checks the values it holds.
  const Tensor held = input.local_shard();
  if (held.defined() && held.numel() > 0) {
    for (double value : cast(held, DType::f64).to_vector<double>()) {
      TESSERA_CHECK(value >= 0.0 && value <= 1.0, "[binary_cross_entropy] input holds ", value,
                    "; all elements of input must be between 0 and 1");
    }
  }
  Tensor log_p = clamp(log(input), -100.0, std::nullopt);
  Tensor log_q = clamp(log(sub(1.0, input)), -100.0, std::nullopt);
  Tensor losses = neg(add(mul(target, log_p), mul(sub(1.0, target), log_q)));
  if (weight.defined()) losses = mul(losses, weight);
  return reduce_pointwise_loss(losses, reduction);
}

Tensor binary_cross_entropy_with_logits(const Tensor& input, const Tensor& target,
                                        const Tensor& weight, const std::string& reduction,
                                        const Tensor& pos_weight) {
  check_pointwise_loss("binary_cross_entropy_with_logits", input, target, reduction, true);
  check_loss_weight("binary_cross_entropy_with_logits", "weight", weight, input.shape());
  check_loss_weight("binary_cross_entropy_with_logits", "pos_weight", pos_weight, input.shape());
  // -[y log s(x) + (1 - y) log(1 - s(x))] = (1 - y) x + softplus(-x), the
  // softplus term weighted by 1 + (pos_weight - 1) y.
  Tensor log_term = softplus(neg(input));
  if (pos_weight.defined()) log_term = mul(log_term, add(mul(sub(pos_weight, 1.0), target), 1.0));
  Tensor losses = add(mul(sub(1.0, target), input), log_term);
  if (weight.defined()) losses = mul(losses, weight);
  return reduce_pointwise_loss(losses, reduction);
}

}  // namespace tessera
