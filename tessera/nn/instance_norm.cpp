#include "tessera/nn/instance_norm.h"

#include "tessera/core/grad_mode.h"
#include "tessera/ops/batch_norm.h"
#include "tessera/ops/creation.h"
#include "tessera/ops/elementwise.h"

namespace tessera::nn {

InstanceNorm::InstanceNorm(std::string type_name, int64_t spatial_dims, int64_t num_features,
                           double eps, std::optional<double> momentum, bool affine,
                           bool track_running_stats)
    : Module(std::move(type_name)),
      spatial_dims_(spatial_dims),
      num_features_(num_features),
      eps_(eps),
      momentum_(momentum) {
  TESSERA_CHECK(num_features > 0, "[", this->type_name(), "] num_features must be positive, got ",
                num_features);
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

Tensor InstanceNorm::forward(const Tensor& x) {
  const int64_t unbatched = spatial_dims_ + 1;
  TESSERA_CHECK(x.dim() == unbatched || x.dim() == unbatched + 1, "[", type_name(), "] expected ",
                unbatched, "-d (unbatched) or ", unbatched + 1, "-d input, got shape ",
                shape_str(x.shape()));
  if (x.dim() == unbatched) return forward(x.unsqueeze(0)).squeeze(0);
  TESSERA_CHECK(x.size(1) == num_features_ || !weight.defined(), "[", type_name(), "] expected ",
                num_features_, " channels (dim 1) with affine=True, got shape ",
                shape_str(x.shape()));
  double factor = momentum_.value_or(0.0);
  if (is_training() && num_batches_tracked.defined()) {
    NoGradGuard no_grad;
    num_batches_tracked.copy_(num_batches_tracked + 1);
    if (!momentum_) factor = 1.0 / static_cast<double>(num_batches_tracked.item<int64_t>());
  }
  return instance_norm(x, running_mean, running_var, weight, bias,
                       is_training() || !running_mean.defined(), factor, eps_);
}

std::string InstanceNorm::extra_repr() const {
  return str_cat(num_features_, ", eps=", eps_, ", momentum=",
                 momentum_ ? str_cat(*momentum_) : std::string("None"),
                 ", affine=", weight.defined() ? "True" : "False",
                 ", track_running_stats=", running_mean.defined() ? "True" : "False");
}

}  // namespace tessera::nn
