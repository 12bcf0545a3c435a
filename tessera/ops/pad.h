#pragma once

// Padding, as torch.nn.functional.pad.

#include <string>
#include <vector>

#include "tessera/core/tensor.h"

namespace tessera {

// Pads x by (before, after) pairs listed from the last dim backwards: {left, right, top,
// bottom, ...}. mode "constant" fills with value; "reflect", "replicate" and "circular"
// take no value. Negative pads crop, in every mode (as PyTorch: reflect and replicate
// pad the whole input and then crop, circular crops and then wraps what is left).
Tensor pad(const Tensor& x, const std::vector<int64_t>& pads, const std::string& mode = "constant",
           double value = 0.0);

}  // namespace tessera
