#include "tessera/nn/activation.h"

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

}  // namespace tessera::nn
