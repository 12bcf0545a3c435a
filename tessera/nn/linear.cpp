#include "tessera/nn/linear.h"

#include <cmath>

#include "tessera/nn/init.h"
#include "tessera/ops/elementwise.h"
#include "tessera/ops/matmul.h"

namespace tessera::nn {

Linear::Linear(int64_t in_features, int64_t out_features, bool bias)
    : Module("Linear"), in_features_(in_features), out_features_(out_features) {
  TESSERA_CHECK(in_features > 0 && out_features > 0,
                "[Linear] in_features and out_features must be positive, got ", in_features,
                " and ", out_features);
  const double bound = 1.0 / std::sqrt(static_cast<double>(in_features));
  weight = register_parameter("weight", Tensor::empty({out_features, in_features}));
  uniform_(weight, -bound, bound);
  if (bias) {
    this->bias = register_parameter("bias", Tensor::empty({out_features}));
    uniform_(this->bias, -bound, bound);
  }
}

Tensor Linear::forward(const Tensor& x) {
  TESSERA_CHECK(x.dim() >= 1 && x.size(-1) == in_features_, "[Linear] expected input with last dim ",
                in_features_, ", got shape ", shape_str(x.shape()));
  Tensor y = matmul(x, weight.t());
  return bias.defined() ? add(y, bias) : y;
}

std::string Linear::extra_repr() const {
  return str_cat("in_features=", in_features_, ", out_features=", out_features_,
                 ", bias=", bias.defined() ? "true" : "false");
}

}  // namespace tessera::nn
