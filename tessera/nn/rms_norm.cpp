#include "tessera/nn/rms_norm.h"

#include "tessera/ops/creation.h"
#include "tessera/ops/norm.h"

namespace tessera::nn {

RMSNorm::RMSNorm(Shape normalized_shape, std::optional<double> eps, bool elementwise_affine)
    : Module("RMSNorm"), normalized_shape_(std::move(normalized_shape)), eps_(eps) {
  TESSERA_CHECK(!normalized_shape_.empty() && numel(normalized_shape_) > 0,
                "[RMSNorm] normalized_shape must be non-empty with positive dims, got ",
                shape_str(normalized_shape_));
  TESSERA_CHECK(!eps || *eps > 0.0, "[RMSNorm] eps must be positive, got ", eps.value_or(0.0));
  if (elementwise_affine) weight = register_parameter("weight", ones(normalized_shape_));
}

Tensor RMSNorm::forward(const Tensor& x) { return rms_norm(x, normalized_shape_, weight, eps_); }

std::string RMSNorm::extra_repr() const {
  std::string text = shape_str(normalized_shape_);
  if (eps_) text += str_cat(", eps=", *eps_);
  return text + ", elementwise_affine=" + (weight.defined() ? "true" : "false");
}

}  // namespace tessera::nn
