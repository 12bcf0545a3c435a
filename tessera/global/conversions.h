#pragma once

// The conversions between local and global tensors are ops with
// OpDef::global_only (to_global, local_to_global, to_local, defined in
// global_tensor.cpp); the eager-global handler hands them here.

#include <vector>

#include "tessera/ops/op.h"

namespace tessera::global {

std::vector<Tensor> run_conversion(const OpDef& op, const std::vector<Tensor>& inputs,
                                   const Attrs& attrs);

}  // namespace tessera::global
