#pragma once

// Normalisation over the batch (batch_norm), over groups of channels
// (group_norm) and over each sample's channels (instance_norm), as
// torch.nn.functional. Inputs are [N, C, *]; statistics are per channel
// (batch_norm), per (sample, group) or per (sample, channel).

#include <optional>

#include "tessera/core/tensor.h"

namespace tessera {

// torch.nn.functional.batch_norm: (x - mean) / sqrt(var + eps) * weight +
// bias per channel (dim 1) of x [N, C, *]. In training the mean and the
// biased variance are the batch's (over every dim but 1), and running_mean /
// running_var, when defined, are updated in place: running = (1 - momentum)
// * running + momentum * batch, with the unbiased variance. Out of training
// the running statistics are used and must be defined. weight, bias,
// running_mean and running_var are [C] tensors of x's dtype or undefined.
// On a global tensor split over the batch the statistics are global (equal
// to one process), at one all-reduce of (sum, sum of squares) per call in
// the forward and one in the backward.
Tensor batch_norm(const Tensor& x, const Tensor& running_mean, const Tensor& running_var,
                  const Tensor& weight = {}, const Tensor& bias = {}, bool training = false,
                  double momentum = 0.1, double eps = 1e-5);

// torch.nn.functional.group_norm: x [N, C, *] with C divisible by
// num_groups; each sample's channels are split into num_groups groups,
// normalised by the group's mean and biased variance, then scaled and
// shifted per channel by weight and bias ([C] or undefined).
Tensor group_norm(const Tensor& x, int64_t num_groups, const Tensor& weight = {},
                  const Tensor& bias = {}, double eps = 1e-5);

// torch.nn.functional.instance_norm: each (sample, channel) of x [N, C, *]
// normalised over its own values (use_input_stats), or by running_mean /
// running_var ([C]) when use_input_stats is false. With use_input_stats and
// running statistics, these are updated with the average over the batch of
// the per-instance statistics, as PyTorch.
Tensor instance_norm(const Tensor& x, const Tensor& running_mean = {},
                     const Tensor& running_var = {}, const Tensor& weight = {},
                     const Tensor& bias = {}, bool use_input_stats = true, double momentum = 0.1,
                     double eps = 1e-5);

}  // namespace tessera
