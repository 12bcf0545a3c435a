#pragma once

// Boxing: moving a global tensor's data to another placement or SBP
// (DESIGN §4's table). Same-placement conversions run one mesh axis at a
// time on that axis's sub-group with one collective each; anything else
// (other placements, nested splits of one dim, mixed partial kinds) takes
// the generic path, which sends every rank exactly the slice intersections
// it needs in one all-to-all. No conversion is unsupported.

#include "tessera/core/tensor.h"

namespace tessera::global {

// `x` (global) laid out on `placement` as `sbp`. Data only: no autograd.
// The result never shares storage with `x`.
Tensor box(const Tensor& x, const Placement& placement, const NdSbp& sbp);

// Predicted cost, in bytes moved per rank plus a latency charge, of
// converting one mesh axis of `parts` ranks from `from` to `to` for a
// tensor of `bytes` logical bytes. 0 for an exact match. Eager dispatch,
// graph boxing and the planner share this one model.
double boxing_cost(const Sbp& from, const Sbp& to, double bytes, int64_t parts);

}  // namespace tessera::global
