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
//   {
//     global::LayoutScript follow = plan.script();
//     Tensor loss = loss_of({x.to_global(mesh, plan.sbp_of("input 0")), ...});
//     loss.backward();
//   }
//
// What runs is eager global dispatch on those layouts. The script makes
// each op call it recognises take the plan's signature
// (global/choose_layout.h); calls it does not recognise choose their own
// from their inputs' layouts, as eager always does.
//
// Graph mode runs a plan too: planner::compile compiles a training step
// whose batch it lays out as the plan says, traced under the plan's
// script, so the graph runs the plan's signatures:
//
//   auto step = planner::compile(plan, [&](const TensorVector& batch) -> TensorVector {
//     optimizer.zero_grad();
//     Tensor loss = loss_of(batch);
//     loss.backward();
//     optimizer.step();
//     return {loss};
//   });
//   Tensor loss = step({x, y})[0];  // x, y: the whole batch, local, the same on every rank

#include <functional>

#include "tessera/graph/compile.h"
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

// graph::compile of `step` on the plan: each call's batch k (a local
// tensor holding the whole batch on every rank, or a global one) is laid
// out as plan.sbp_of("input k") before `step` sees it, and the trace runs
// under the plan's script. A call with another number of inputs than the
// plan's is an error.
graph::CompiledFunction compile(const Plan& plan, graph::TracedFn step,
                                graph::CompileOptions options = {});

// graph::compile's auto_parallel (graph/compile.h; this library hands it to
// graph::set_auto_parallelizer when it loads): traces `step` on the
// inputs' logical shapes with every optimizer's update left out, plans it
// for options.mesh under options.memory_budget (the optimizer's state per
// parameter as it reported), lays every variable out in place as the plan
// says, and returns the step each call runs (compile's wrapper above).
graph::ParallelStep parallelize_step(const graph::TracedFn& step, const TensorVector& inputs,
                                     const graph::CompileOptions& options);

// The plan of a function compiled with auto_parallel, once its first call
// made it; raises otherwise.
const Plan& plan_of(const graph::CompiledFunction& function);

// plan_of(function)'s prediction with its memory as graph mode holds it,
// once a call has compiled the step (before that: an error): the
// parameters and optimizer state, which live outside the graph, and the
// most the compiled graph holds during a run by its memory plan (the
// arena, where the gradients live too, and the values a run makes new:
// CompiledFunction::last_planned_peak_bytes). The eager prediction counts
// each temporary as the dispatcher allocates it instead.
StepPrediction compiled_prediction(const graph::CompiledFunction& function);

}  // namespace tessera::planner
