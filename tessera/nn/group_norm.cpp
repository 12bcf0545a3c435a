#include "tessera/nn/group_norm.h"

#include "tessera/ops/batch_norm.h"
#include "tessera/ops/creation.h"

namespace tessera::nn {

GroupNorm::GroupNorm(int64_t num_groups, int64_t num_channels, double eps, bool affine)
    : Module("GroupNorm"), num_groups_(num_groups), num_channels_(num_channels), eps_(eps) {
  TESSERA_CHECK(num_groups > 0 && num_channels > 0 && num_channels % num_groups == 0,
                "[GroupNorm] num_channels must be divisible by num_groups (both positive), got ",
                num_channels, " and ", num_groups);
  if (affine) {
    weight = register_parameter("weight", ones({num_channels}));
    bias = register_parameter("bias", zeros({num_channels}));
  }
}

Tensor GroupNorm::forward(const Tensor& x) {
  TESSERA_CHECK(x.dim() >= 2 && x.size(1) == num_channels_, "[GroupNorm] expected [N, ",
                num_channels_, ", *] input, got shape ", shape_str(x.shape()));
  return group_norm(x, num_groups_, weight, bias, eps_);
}

std::string GroupNorm::extra_repr() const {
  return str_cat(num_groups_, ", ", num_channels_, ", eps=", eps_,
                 ", affine=", weight.defined() ? "True" : "False");
}

}  // namespace tessera::nn
