#pragma once

// Fused optimizer updates as ops: one pass over a parameter, its gradient
// and its state, written in place. Optimizers (tessera/optim) call these,
// so a tracer sees each update as one node, and on global tensors they run
// on every rank's shards like any op (the written tensors keep their
// layout; the gradient is boxed to it).

#include <cstdint>

#include "tessera/core/tensor.h"

namespace tessera {

struct SgdStep {
  double lr = 0.01;
  double momentum = 0;
  double dampening = 0;
  double weight_decay = 0;
  bool nesterov = false;
  // The momentum buffer starts as the first gradient (PyTorch's rule).
  bool first_step = false;
};

// PyTorch's SGD update of `param` from `grad`:
//   g = grad + weight_decay * param
//   b = first_step ? g : momentum * b + (1 - dampening) * g   (with a buffer)
//   param -= lr * (nesterov ? g + momentum * b : b)
// `momentum_buffer` is written in place; pass an undefined tensor for plain
// SGD (momentum must then be 0). All tensors share shape, dtype (f32 or
// f64) and device; param and the buffer must be contiguous.
void sgd_step_(const Tensor& param, const Tensor& grad, const Tensor& momentum_buffer,
               const SgdStep& step);

struct AdamStep {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0;
  bool decoupled_weight_decay = false;  // AdamW
  int64_t step = 1;                     // 1 on the first update (bias correction)
};

// PyTorch's Adam (AdamW with decoupled_weight_decay) update of `param` and
// its moments `exp_avg`, `exp_avg_sq`, all written in place.
void adam_step_(const Tensor& param, const Tensor& grad, const Tensor& exp_avg,
                const Tensor& exp_avg_sq, const AdamStep& step);

}  // namespace tessera
