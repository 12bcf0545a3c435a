#include "tessera/nn/layer_norm.h"

#include "tessera/ops/creation.h"
#include "tessera/ops/norm.h"

namespace tessera::nn {

LayerNorm::LayerNorm(Shape normalized_shape, double eps, bool elementwise_affine, bool bias)
    : Module("LayerNorm"), normalized_shape_(std::move(normalized_shape)), eps_(eps) {
  TESSERA_CHECK(!normalized_shape_.empty() && numel(normalized_shape_) > 0,
                "[LayerNorm] normalized_shape must be non-empty with positive dims, got ",
                shape_str(normalized_shape_));
  TESSERA_CHECK(eps > 0.0, "[LayerNorm] eps must be positive, got ", eps);
  if (elementwise_affine) {
    weight = register_parameter("weight", ones(normalized_shape_));
    if (bias) this->bias = register_parameter("bias", zeros(normalized_shape_));
  }
}

Tensor LayerNorm::forward(const Tensor& x) {
  return layer_norm(x, normalized_shape_, weight, bias, eps_);
}

std::string LayerNorm::extra_repr() const {
  return str_cat(shape_str(normalized_shape_), ", eps=", eps_,
                 ", elementwise_affine=", weight.defined() ? "true" : "false");
}

}  // namespace tessera::nn
