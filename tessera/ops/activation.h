#pragma once

// The activations of torch.nn.functional beyond relu, gelu, silu and
// softplus (elementwise.h), with PyTorch's defaults and PyTorch's gradients
// at the kinks (e.g. hardtanh and relu6 have zero gradient at their bounds).
// Each is a composition of elementwise ops.

#include "tessera/core/tensor.h"
#include "tessera/ops/scalar.h"

namespace tessera {

// x where x > 0, else negative_slope * x (gradient negative_slope at 0).
Tensor leaky_relu(const Tensor& x, double negative_slope = 0.01);
// x where x > 0, else alpha * (exp(x) - 1).
Tensor elu(const Tensor& x, double alpha = 1.0);
// scale * elu(x, alpha) with PyTorch's fixed alpha and scale.
Tensor selu(const Tensor& x);
// max(0, x) + min(0, alpha * (exp(x / alpha) - 1)); alpha must not be 0.
Tensor celu(const Tensor& x, double alpha = 1.0);
// x limited to [min_val, max_val]; the gradient is zero at and beyond them.
Tensor hardtanh(const Tensor& x, double min_val = -1.0, double max_val = 1.0);
// hardtanh(x, 0, 6).
Tensor relu6(const Tensor& x);
// x * relu6(x + 3) / 6 and relu6(x + 3) / 6.
Tensor hardswish(const Tensor& x);
Tensor hardsigmoid(const Tensor& x);
// x * tanh(softplus(x)).
Tensor mish(const Tensor& x);
// First half of x along dim times the sigmoid of the second half; x.size(dim)
// must be even.
Tensor glu(const Tensor& x, int64_t dim = -1);
// log(sigmoid(x)), stable for large |x|.
Tensor logsigmoid(const Tensor& x);
// x / (1 + |x|).
Tensor softsign(const Tensor& x);
// x where x > 0, else weight * x; weight has 1 element or one per channel
// (x.size(1); inputs of fewer than 2 dims have one channel).
Tensor prelu(const Tensor& x, const Tensor& weight);
// x where x > threshold, else value.
Tensor threshold(const Tensor& x, double threshold, Scalar value);

}  // namespace tessera
