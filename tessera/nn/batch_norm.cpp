#include "tessera/nn/batch_norm.h"

#include <algorithm>

#include "tessera/core/grad_mode.h"
#include "tessera/ops/batch_norm.h"
#include "tessera/ops/creation.h"
#include "tessera/ops/elementwise.h"

namespace tessera::nn {

BatchNorm::BatchNorm(std::string type_name, std::vector<int64_t> valid_dims, int64_t num_features,
                     double eps, std::optional<double> momentum, bool affine,
                     bool track_running_stats)
    : Module(std::move(type_name)),
      valid_dims_(std::move(valid_dims)),
      num_features_(num_features),
      eps_(eps),
      momentum_(momentum) {
  TESSERA_CHECK(num_features > 0, "[", this->type_name(), "] num_features must be positive, got ",
                num_features);
  TESSERA_CHECK(eps > 0.0 && (!momentum || (*momentum >= 0.0 && *momentum <= 1.0)), "[",
                this->type_name(), "] needs eps > 0 and momentum in [0, 1] (or none), got eps=",
                eps, ", momentum=", momentum ? str_cat(*momentum) : std::string("none"));
  if (affine) {
    weight = register_parameter("weight", ones({num_features}));
    bias = register_parameter("bias", zeros({num_features}));
  }
  if (track_running_stats) {
    running_mean = register_buffer("running_mean", zeros({num_features}));
    running_var = register_buffer("running_var", ones({num_features}));
    num_batches_tracked = register_buffer("num_batches_tracked", zeros({}, DType::i64));
  }
}

Tensor BatchNorm::forward(const Tensor& x) {
  const bool valid_rank =
      std::find(valid_dims_.begin(), valid_dims_.end(), x.dim()) != valid_dims_.end();
  TESSERA_CHECK(valid_rank && x.size(1) == num_features_, "[", type_name(), "] expected ",
                valid_dims_.size() == 2  ? "[N, C] or [N, C, L]"
                : valid_dims_[0] == 4 ? "[N, C, H, W]"
                                      : "[N, C, D, H, W]",
                " input with C = ", num_features_, ", got shape ", shape_str(x.shape()));
  double factor = momentum_.value_or(0.0);
  if (is_training() && num_batches_tracked.defined()) {
    NoGradGuard no_grad;
    num_batches_tracked.copy_(num_batches_tracked + 1);
    if (!momentum_) factor = 1.0 / static_cast<double>(num_batches_tracked.item<int64_t>());
  }
  // Without running statistics the batch's are used in eval too, as PyTorch.
  const bool use_batch_stats = is_training() || !running_mean.defined();
  if (!per_rank_ || !x.is_global()) {
    return batch_norm(x, running_mean, running_var, weight, bias, use_batch_stats, factor, eps_);
  }
  // Per-rank statistics: the local shard normalised alone, the affine map
  // applied on the global tensor so that its gradients are summed.
  Tensor running_mean_here = running_mean.defined() ? running_mean.local_shard() : Tensor();
  Tensor running_var_here = running_var.defined() ? running_var.local_shard() : Tensor();
  Tensor y = batch_norm(x.to_local(), running_mean_here, running_var_here, {}, {},
                        use_batch_stats, factor, eps_)
                 .to_global(x.placement(), x.nd_sbp());
  if (weight.defined()) {
    Shape channel_shape(static_cast<size_t>(x.dim()), 1);
    channel_shape[1] = num_features_;
    y = y * weight.reshape(channel_shape) + bias.reshape(channel_shape);
  }
  return y;
}

std::string BatchNorm::extra_repr() const {
  return str_cat(num_features_, ", eps=", eps_, ", momentum=",
                 momentum_ ? str_cat(*momentum_) : std::string("None"),
                 ", affine=", weight.defined() ? "true" : "false",
                 ", track_running_stats=", running_mean.defined() ? "true" : "false",
                 per_rank_ ? ", per_rank_statistics=true" : "");
}

}  // namespace tessera::nn
