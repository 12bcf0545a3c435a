#pragma once

// Boxing: moving a global tensor's data to another placement or SBP
// (DESIGN §4's table), decided before it runs. plan_boxing is a pure
// function of metadata: it returns the steps (which collective on which
// mesh axis's sub-groups, or the slice-intersection transfers) and their
// cost in the one cost model. box() executes exactly that plan; graph mode
// and the planner use the same plans.
//
// Same-placement conversions run one mesh axis at a time, innermost first,
// on that axis's sub-groups; anything else (other placements, nested splits
// of one dim, mixed partial kinds) takes the generic route, which sends
// every rank exactly the slice intersections it needs in one all-to-all.
// No conversion is unsupported.

#include <optional>
#include <string>
#include <vector>

#include "tessera/core/tensor.h"
#include "tessera/global/cost_model.h"

namespace tessera::global {

enum class BoxingRoute : uint8_t {
  copy,                   // a group of one rank: the data is already whole
  all_reduce,             // P -> B
  reduce_scatter,         // P -> S(d), d split evenly on every group
  all_reduce_then_slice,  // P -> S(d), uneven splits
  all_gather,             // S -> B, and S -> P(max/min) (every rank holds the whole)
  all_to_all,             // S(i) -> S(j)
  local_slice,            // B -> S: each rank keeps its slice
  keep_on_first,          // B -> P(sum): the first rank keeps it, others hold zeros;
                          // B -> P(max/min): every rank keeps it
  into_zeros,             // S -> P(sum): each rank writes its slice into zeros
  slice_intersections,    // anything else: one all-to-all of the exact pieces
};
const char* route_name(BoxingRoute route);

struct BoxingStep {
  BoxingRoute route = BoxingRoute::copy;
  int axis = -1;           // the mesh axis converted; -1 for slice intersections (all axes)
  NdSbp from;              // the whole layout before the step
  NdSbp to;                // and after it
  int64_t group_size = 1;  // ranks in one collective's group
  std::optional<Collective> collective;  // none for local steps
  // For the busiest rank: the bytes it hands the collective (what the
  // backend moves for it), the bytes it sends over its links, and the bytes
  // a local step writes.
  double payload_bytes = 0;
  double link_bytes = 0;
  double local_bytes = 0;
  double seconds = 0;  // priced by the cost model
};

struct BoxingPlan {
  TensorMeta from;  // logical shape, dtype, placement and SBP
  Placement to_placement;
  NdSbp to_sbp;
  std::vector<BoxingStep> steps;  // none: the layouts already agree
  double seconds = 0;             // the steps' sum

  // The steps in words, one line each.
  std::string explain() const;
};

// What the rank `rank` (of the world) hands collectives when `plan` runs:
// the number of collectives it joins and their payload bytes, as a
// backend counts them (distributed::traffic()). The steps' payload_bytes
// are the busiest rank's; this is one rank's.
struct RankTraffic {
  int64_t calls = 0;
  double payload_bytes = 0;
};
RankTraffic rank_traffic(const BoxingPlan& plan, int rank);

// How `meta` (global) reaches `placement` + `sbp`. Pure: needs no process
// group, so plans can be made for meshes this job does not have.
BoxingPlan plan_boxing(const TensorMeta& meta, const Placement& placement, const NdSbp& sbp,
                       const CostModel& model = default_cost_model());

// Executes `plan` on `x` (whose metadata it was made for). Data only: no
// autograd. The result never shares storage with `x`.
Tensor run_boxing(const BoxingPlan& plan, const Tensor& x);

// run_boxing(plan_boxing(x.meta(), placement, sbp), x).
Tensor box(const Tensor& x, const Placement& placement, const NdSbp& sbp);

}  // namespace tessera::global
