#include "tessera/nn/activation.h"

#include "tessera/nn/repr.h"
#include "tessera/ops/activation.h"
#include "tessera/ops/creation.h"
#include "tessera/ops/elementwise.h"

namespace tessera::nn {

Tensor ReLU::forward(const Tensor& x) { return relu(x); }

GELU::GELU(std::string approximate) : Module("GELU"), approximate_(std::move(approximate)) {
  TESSERA_CHECK(approximate_ == "none" || approximate_ == "tanh",
                "[GELU] approximate must be \"none\" or \"tanh\", got \"", approximate_, "\"");
}
Tensor GELU::forward(const Tensor& x) { return gelu(x, approximate_); }
std::string GELU::extra_repr() const {
  return approximate_ == "none" ? "" : "approximate='" + approximate_ + "'";
}

Tensor SiLU::forward(const Tensor& x) { return silu(x); }

Tensor Tanh::forward(const Tensor& x) { return tanh(x); }

Tensor Sigmoid::forward(const Tensor& x) { return sigmoid(x); }

Tensor LeakyReLU::forward(const Tensor& x) { return leaky_relu(x, negative_slope_); }
std::string LeakyReLU::extra_repr() const {
  return "negative_slope=" + py_float(negative_slope_);
}

Tensor ELU::forward(const Tensor& x) { return elu(x, alpha_); }
std::string ELU::extra_repr() const { return "alpha=" + py_float(alpha_); }

Tensor CELU::forward(const Tensor& x) { return celu(x, alpha_); }
std::string CELU::extra_repr() const { return "alpha=" + py_float(alpha_); }

Tensor SELU::forward(const Tensor& x) { return selu(x); }

Hardtanh::Hardtanh(double min_val, double max_val)
    : Module("Hardtanh"), min_val_(min_val), max_val_(max_val) {
  TESSERA_CHECK(max_val_ > min_val_, "[Hardtanh] max_val (", max_val_,
                ") must be greater than min_val (", min_val_, ")");
}
Tensor Hardtanh::forward(const Tensor& x) { return hardtanh(x, min_val_, max_val_); }
std::string Hardtanh::extra_repr() const {
  return "min_val=" + py_float(min_val_) + ", max_val=" + py_float(max_val_);
}

Tensor ReLU6::forward(const Tensor& x) { return relu6(x); }
Tensor Hardswish::forward(const Tensor& x) { return hardswish(x); }
Tensor Hardsigmoid::forward(const Tensor& x) { return hardsigmoid(x); }
Tensor Mish::forward(const Tensor& x) { return mish(x); }
Tensor LogSigmoid::forward(const Tensor& x) { return logsigmoid(x); }
Tensor Softsign::forward(const Tensor& x) { return softsign(x); }

Tensor Softplus::forward(const Tensor& x) { return softplus(x, beta_, threshold_); }
std::string Softplus::extra_repr() const {
  // PyTorch's defaults are the ints 1 and 20, printed without ".0".
  return str_cat("beta=", beta_, ", threshold=", threshold_);
}

Tensor GLU::forward(const Tensor& x) { return glu(x, dim_); }
std::string GLU::extra_repr() const { return str_cat("dim=", dim_); }

Tensor Threshold::forward(const Tensor& x) { return threshold(x, threshold_, value_); }
std::string Threshold::extra_repr() const {
  return str_cat("threshold=", threshold_, ", value=", value_);
}

PReLU::PReLU(int64_t num_parameters, double init)
    : Module("PReLU"), num_parameters_(num_parameters) {
  TESSERA_CHECK(num_parameters >= 1, "[PReLU] num_parameters must be at least 1, got ",
                num_parameters);
  weight = register_parameter("weight", full({num_parameters}, init, DType::f32));
}
Tensor PReLU::forward(const Tensor& x) { return prelu(x, weight); }
std::string PReLU::extra_repr() const { return str_cat("num_parameters=", num_parameters_); }

}  // namespace tessera::nn
