#pragma once

// Elementwise losses with torch.nn.functional's semantics: each compares an
// input with a target element by element, then reduces with reduction
// "mean" (over all loss elements), "sum" or "none". Gradients flow to both
// the input and the target.

#include <string>

#include "tessera/core/tensor.h"

namespace tessera {

// |input - target|, the two broadcast together.
Tensor l1_loss(const Tensor& input, const Tensor& target, const std::string& reduction = "mean");
// 0.5 d^2 / beta where d = |input - target| < beta, else d - 0.5 beta
// (beta >= 0; beta == 0 is l1_loss).
Tensor smooth_l1_loss(const Tensor& input, const Tensor& target,
                      const std::string& reduction = "mean", double beta = 1.0);
// 0.5 d^2 where d = |input - target| < delta, else delta (d - 0.5 delta)
// (delta > 0).
Tensor huber_loss(const Tensor& input, const Tensor& target, const std::string& reduction = "mean",
                  double delta = 1.0);
// Kullback-Leibler divergence of log-probabilities `input` from `target`
// (probabilities, or log-probabilities when log_target): target (log target
// - input), with 0 where target is 0. reduction also takes "batchmean"
// (the sum over the size of dim 0).
Tensor kl_div(const Tensor& input, const Tensor& target, const std::string& reduction = "mean",
              bool log_target = false);
// -weight (target log(input) + (1 - target) log(1 - input)), the logs
// clamped to >= -100; input in [0, 1] and target of input's shape; weight
// broadcasts to it.
Tensor binary_cross_entropy(const Tensor& input, const Tensor& target, const Tensor& weight = {},
                            const std::string& reduction = "mean");
// binary_cross_entropy(sigmoid(input), target) in one numerically stable
// step; pos_weight (broadcast over the trailing dims, e.g. [C]) scales the
// positive term, weight the whole loss.
Tensor binary_cross_entropy_with_logits(const Tensor& input, const Tensor& target,
                                        const Tensor& weight = {},
                                        const std::string& reduction = "mean",
                                        const Tensor& pos_weight = {});

}  // namespace tessera
