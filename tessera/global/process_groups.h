#pragma once

// The communication groups global tensors use, made on first use from the
// default group (distributed::default_group()) and cached.

#include <memory>
#include <vector>

#include "tessera/core/placement.h"
#include "tessera/distributed/group.h"

namespace tessera::global {

// This process's rank in the default group.
int world_rank();
// The group of `ranks` (ranks of the default group, in this order). Only its
// members may call this, all in the same order (SPMD).
std::shared_ptr<distributed::Group> group_of(const std::vector<int>& ranks);
// While set on a thread, group_of on it returns a second set of groups (same
// ranks, their own connections), so gradients can be reduced on a
// communication thread while the main thread runs other collectives.
void use_gradient_groups(bool on);
bool using_gradient_groups();

// The ranks of `placement` that share every mesh coordinate with the rank at
// `index` except along `axis`, in mesh order.
std::vector<int> axis_ranks(const Placement& placement, int index, int axis);

}  // namespace tessera::global
