#include "tessera/nn/loss.h"

#include "tessera/ops/elementwise.h"
#include "tessera/ops/elementwise_loss.h"
#include "tessera/ops/loss.h"
#include "tessera/ops/reduce.h"

namespace tessera::nn {

Loss::Loss(std::string type_name, std::string reduction, bool batchmean_allowed)
    : Module(std::move(type_name)), reduction_(std::move(reduction)) {
  TESSERA_CHECK(reduction_ == "mean" || reduction_ == "sum" || reduction_ == "none" ||
                    (batchmean_allowed && reduction_ == "batchmean"),
                "[", this->type_name(), "] reduction must be \"mean\", \"sum\"",
                batchmean_allowed ? ", \"batchmean\"" : "", " or \"none\", got \"", reduction_,
                "\"");
}

CrossEntropyLoss::CrossEntropyLoss(Tensor weight, int64_t ignore_index, std::string reduction,
                                   double label_smoothing)
    : Loss("CrossEntropyLoss", std::move(reduction)),
      weight_(std::move(weight)),
      ignore_index_(ignore_index),
      label_smoothing_(label_smoothing) {
  if (weight_.defined()) register_buffer("weight", weight_);
}

Tensor CrossEntropyLoss::forward(const Tensor& input, const Tensor& target) {
  return cross_entropy(input, target, weight_, ignore_index_, reduction_, label_smoothing_);
}

NLLLoss::NLLLoss(Tensor weight, int64_t ignore_index, std::string reduction)
    : Loss("NLLLoss", std::move(reduction)),
      weight_(std::move(weight)),
      ignore_index_(ignore_index) {
  if (weight_.defined()) register_buffer("weight", weight_);
}

Tensor NLLLoss::forward(const Tensor& input, const Tensor& target) {
  return nll_loss(input, target, weight_, ignore_index_, reduction_);
}

Tensor MSELoss::forward(const Tensor& input, const Tensor& target) {
  return mse_loss(input, target, reduction_);
}

Tensor L1Loss::forward(const Tensor& input, const Tensor& target) {
  return l1_loss(input, target, reduction_);
}

SmoothL1Loss::SmoothL1Loss(std::string reduction, double beta)
    : Loss("SmoothL1Loss", std::move(reduction)), beta_(beta) {
  TESSERA_CHECK(beta >= 0, "[SmoothL1Loss] beta must be >= 0, got ", beta);
}
Tensor SmoothL1Loss::forward(const Tensor& input, const Tensor& target) {
  return smooth_l1_loss(input, target, reduction_, beta_);
}

HuberLoss::HuberLoss(std::string reduction, double delta)
    : Loss("HuberLoss", std::move(reduction)), delta_(delta) {
  TESSERA_CHECK(delta > 0, "[HuberLoss] delta must be > 0, got ", delta);
}
Tensor HuberLoss::forward(const Tensor& input, const Tensor& target) {
  return huber_loss(input, target, reduction_, delta_);
}

Tensor KLDivLoss::forward(const Tensor& input, const Tensor& target) {
  return kl_div(input, target, reduction_, log_target_);
}

BCELoss::BCELoss(Tensor weight, std::string reduction)
    : Loss("BCELoss", std::move(reduction)), weight_(std::move(weight)) {
  if (weight_.defined()) register_buffer("weight", weight_);
}
Tensor BCELoss::forward(const Tensor& input, const Tensor& target) {
  return binary_cross_entropy(input, target, weight_, reduction_);
}

BCEWithLogitsLoss::BCEWithLogitsLoss(Tensor pos_weight, std::string reduction)
    : Loss("BCEWithLogitsLoss", std::move(reduction)), pos_weight_(std::move(pos_weight)) {
  if (pos_weight_.defined()) register_buffer("pos_weight", pos_weight_);
}

Tensor BCEWithLogitsLoss::forward(const Tensor& input, const Tensor& target) {
  return nn::binary_cross_entropy_with_logits(input, target, pos_weight_, reduction_);
}

Tensor binary_cross_entropy_with_logits(const Tensor& input, const Tensor& target,
                                        const Tensor& pos_weight, const std::string& reduction) {
  TESSERA_CHECK(input.shape() == target.shape(),
                "[binary_cross_entropy_with_logits] input ", shape_str(input.shape()),
                " and target ", shape_str(target.shape()), " must have the same shape");
  TESSERA_CHECK(is_floating(input.dtype()) && is_floating(target.dtype()),
                "[binary_cross_entropy_with_logits] input and target must be floating point, got ",
                dtype_name(input.dtype()), " and ", dtype_name(target.dtype()));
  TESSERA_CHECK(reduction == "mean" || reduction == "sum" || reduction == "none",
                "[binary_cross_entropy_with_logits] reduction must be \"mean\", \"sum\" or "
                "\"none\", got \"", reduction, "\"");
  // -[y log s(x) + (1 - y) log(1 - s(x))] = (1 - y) x + softplus(-x), with the
  // softplus term weighted by 1 + (pos_weight - 1) y.
  Tensor log_term = softplus(neg(input));
  if (pos_weight.defined()) log_term = log_term * ((pos_weight - 1.0) * target + 1.0);
  Tensor loss = (1.0 - target) * input + log_term;
  if (reduction == "none") return loss;
  return reduction == "sum" ? sum(loss) : mean(loss);
}

}  // namespace tessera::nn
