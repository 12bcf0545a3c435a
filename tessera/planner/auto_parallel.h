#pragma once

// Auto-parallel for eager code (DESIGN §8): trace one training step of a
// module on a sample batch, plan it for a mesh, and lay the module's
// parameters out as the plan says. The model code does not change; the
// batch is laid out as plan.sbp_of("input k") says.
//
//   auto loss_of = [&](const TensorVector& batch) {
//     return cross_entropy(model->forward(batch[0]), batch[1]);
//   };
//   planner::Plan plan = planner::auto_parallelize(*model, mesh, loss_of, {x, y});
//   std::cout << plan.explain();
//   Tensor loss = loss_of({x.to_global(mesh, plan.sbp_of("input 0")), ...});
//
// What runs is eager global dispatch on those layouts: each op call
// chooses its signature from its inputs' layouts (global/choose_layout.h)
// as it always does, so the layouts the plan gives the tensors it does not
// choose (the parameters and the batch) are the ones that take effect.

#include <functional>

#include "tessera/nn/module.h"
#include "tessera/planner/planner.h"

namespace tessera::planner {

using LossFn = std::function<Tensor(const TensorVector& batch)>;

// The graph of one step (loss_fn on a batch like `sample_batch`, and its
// backward) on local tensors. The module's gradients are dropped first.
graph::Graph trace_step(nn::Module& model, const LossFn& loss_fn, const TensorVector& sample_batch);

// Traces the step, plans it for `mesh` (options.mesh is set to it), and
// lays the parameters out (Module::to_global with the plan's layouts;
// buffers, and parameters the step does not read, are broadcast). The module must still be local.
Plan auto_parallelize(nn::Module& model, const Placement& mesh, const LossFn& loss_fn,
                      const TensorVector& sample_batch, PlanOptions options = {});

}  // namespace tessera::planner
