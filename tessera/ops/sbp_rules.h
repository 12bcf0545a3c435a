#pragma once

// Reusable SBP signature builders for op families.

#include <vector>

#include "tessera/core/sbp.h"
#include "tessera/core/tensor.h"

namespace tessera {

// For every output axis: inputs that have that axis at full size are split
// along it, inputs broadcast along it stay B; the output is split.
std::vector<SbpSignature> broadcast_split_signatures(const MetaVector& inputs,
                                                     const Shape& out_shape,
                                                     size_t num_outputs = 1);

// Every input and output split along the same axis, for each axis in `axes`.
std::vector<SbpSignature> same_split_signatures(size_t num_inputs, size_t num_outputs,
                                                const std::vector<int64_t>& axes);

// All inputs and outputs carry `sbp` (e.g. P(sum) for add, P(max) for maximum).
SbpSignature uniform_signature(size_t num_inputs, size_t num_outputs, Sbp sbp);

}  // namespace tessera
