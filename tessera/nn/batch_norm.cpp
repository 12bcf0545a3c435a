#include "tessera/nn/batch_norm.h"

#include <algorithm>

#include "tessera/core/grad_mode.h"
#include "tessera/ops/creation.h"
#include "tessera/ops/elementwise.h"
#include "tessera/ops/reduce.h"

namespace tessera::nn {

BatchNorm::BatchNorm(std::string type_name, std::vector<int64_t> valid_dims, int64_t num_features,
                     double eps, double momentum, bool affine, bool track_running_stats)
    : Module(std::move(type_name)),
      valid_dims_(std::move(valid_dims)),
      num_features_(num_features),
      eps_(eps),
      momentum_(momentum) {
  TESSERA_CHECK(num_features > 0, "[", this->type_name(), "] num_features must be positive, got ",
                num_features);
  TESSERA_CHECK(eps > 0.0 && momentum >= 0.0 && momentum <= 1.0, "[", this->type_name(),
                "] needs eps > 0 and momentum in [0, 1], got eps=", eps, ", momentum=", momentum);
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
                valid_dims_.size() == 1 ? "[N, C, H, W]" : "[N, C] or [N, C, L]", " input with C = ",
                num_features_, ", got shape ", shape_str(x.shape()));
  Dims reduce_dims = {0};
  for (int64_t d = 2; d < x.dim(); ++d) reduce_dims.push_back(d);
  Shape channel_shape(x.dim(), 1);
  channel_shape[1] = num_features_;

  Tensor mean_c, var_c;
  if (is_training() || !running_mean.defined()) {
    const int64_t count = x.numel() / num_features_;
    TESSERA_CHECK(!is_training() || count > 1, "[", type_name(),
                  "] needs more than one value per channel in training, got shape ",
                  shape_str(x.shape()));
    mean_c = mean(x, reduce_dims);
    var_c = var(x, reduce_dims, /*correction=*/0);
    if (is_training() && running_mean.defined()) {
      NoGradGuard no_grad;
      const double unbias = static_cast<double>(count) / static_cast<double>(count - 1);
      running_mean.copy_(running_mean * (1.0 - momentum_) + mean_c.detach() * momentum_);
      running_var.copy_(running_var * (1.0 - momentum_) + var_c.detach() * (unbias * momentum_));
      num_batches_tracked.copy_(num_batches_tracked + 1);
    }
  } else {
    mean_c = running_mean;
    var_c = running_var;
  }
  Tensor y = (x - mean_c.reshape(channel_shape)) * rsqrt(var_c.reshape(channel_shape) + eps_);
  if (weight.defined()) y = y * weight.reshape(channel_shape) + bias.reshape(channel_shape);
  return y;
}

std::string BatchNorm::extra_repr() const {
  return str_cat(num_features_, ", eps=", eps_, ", momentum=", momentum_,
                 ", affine=", weight.defined() ? "true" : "false",
                 ", track_running_stats=", running_mean.defined() ? "true" : "false");
}

}  // namespace tessera::nn
