#pragma once

#include <limits>
#include <vector>

#include "tessera/core/tensor.h"

namespace tessera::optim {

// Scales all gradients in place so that their joint norm (p-norm over every
// element of every gradient; p = infinity for the max) is at most max_norm,
// as torch.nn.utils.clip_grad_norm_. Returns the norm before clipping.
// Parameters without a gradient are skipped. With error_if_nonfinite, a NaN
// or infinite norm raises an error instead of scaling. Inside a function
// graph::compile traces, the norm and the scale are computed in the graph
// (in the gradients' dtype), the norm is not known on the host (the return
// value is NaN) and error_if_nonfinite cannot be checked.
double clip_grad_norm_(const std::vector<Tensor>& params, double max_norm,
                       double norm_type = 2.0, bool error_if_nonfinite = false);
// Clamps every gradient element to [-clip_value, clip_value].
void clip_grad_value_(const std::vector<Tensor>& params, double clip_value);

}  // namespace tessera::optim
