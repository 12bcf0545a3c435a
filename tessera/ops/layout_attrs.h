#pragma once

// A global layout (placement and SBP) as op attributes, so the ops that
// take one are ordinary calls: to_global, local_to_global, and the
// factories (full, rand, randn) asked for a global tensor. A factory call
// whose attributes hold a layout is dispatched to the eager-global handler,
// which builds each rank's shard.

#include "tessera/core/placement.h"
#include "tessera/core/sbp.h"
#include "tessera/ops/attrs.h"

namespace tessera {

// Sets "device", "ranks", "mesh" and "sbp" (per mesh axis a kind and an axis).
void set_layout_attrs(Attrs& attrs, const Placement& placement, const NdSbp& sbp);
// Whether the attributes hold a layout.
bool has_layout_attrs(const Attrs& attrs);
// Removes the layout, leaving the local call's attributes.
void erase_layout_attrs(Attrs& attrs);
Placement placement_attr(const Attrs& attrs);
NdSbp sbp_attr(const Attrs& attrs);

}  // namespace tessera
