#pragma once

// Loss functions with PyTorch's semantics. reduction is "mean", "sum" or
// "none" (per-sample losses).

#include <string>

#include "tessera/core/tensor.h"

namespace tessera {

// Softmax cross entropy of logits [N, C, d1...] (or [C]) against class
// indices target [N, d1...] (or []), fused into one kernel. weight [C]
// rescales classes; targets equal to ignore_index contribute nothing; "mean"
// divides by the summed weight of the counted targets; label_smoothing mixes
// the one-hot target with the uniform distribution, as torch's cross_entropy.
// A floating target of the logits' shape holds class probabilities instead
// (smoothed alike; ignore_index does not apply and "mean" divides by the
// sample count).
Tensor cross_entropy(const Tensor& logits, const Tensor& target, const Tensor& weight = {},
                     int64_t ignore_index = -100, const std::string& reduction = "mean",
                     double label_smoothing = 0.0);
// Negative log-likelihood of log-probabilities [N, C, d1...] (or [C]) at the
// target classes, with the same weight / ignore_index / reduction rules.
Tensor nll_loss(const Tensor& log_probs, const Tensor& target, const Tensor& weight = {},
                int64_t ignore_index = -100, const std::string& reduction = "mean");
// Squared error (a - b)^2, with a and b broadcast together.
Tensor mse_loss(const Tensor& a, const Tensor& b, const std::string& reduction = "mean");

}  // namespace tessera
