#include "tessera/planner/auto_parallel.h"

#include <algorithm>
#include <memory>
#include <utility>

#include "tessera/graph/trace.h"
#include "tessera/optim/optimizer.h"

namespace tessera::planner {

graph::Graph trace_step(nn::Module& model, const LossFn& loss_fn,
                        const TensorVector& sample_batch) {
  for (const auto& [name, param] : model.named_parameters()) {
    TESSERA_CHECK(!param.is_global(), "[auto_parallelize] parameter '", name,
                  "' is already global; plan a local module");
  }
  model.zero_grad();
  return graph::trace(
      [&](const TensorVector& batch) -> TensorVector {
        Tensor loss = loss_fn(batch);
        TESSERA_CHECK(loss.numel() == 1,
                      "[auto_parallelize] the loss function must return one "
                      "number, got shape ",
                      shape_str(loss.shape()));
        loss.backward();
        return {loss};
      },
      sample_batch);
}

Plan auto_parallelize(nn::Module& model, const Placement& mesh, const LossFn& loss_fn,
                      const TensorVector& sample_batch, PlanOptions options) {
  options.mesh = mesh;
  const graph::Graph step = trace_step(model, loss_fn, sample_batch);
  const nn::Module::NamedTensors named = model.named_parameters();
  Plan result = plan(step, options, named);
  model.to_global(mesh, [&](const std::string& name, const Tensor& tensor) -> NdSbp {
    (void)tensor;
    for (const TensorChoice& choice : result.tensors) {
      if (choice.name == name) return choice.sbp;
    }
    return NdSbp::broadcast(mesh.ndim());
  });
  return result;
}

namespace {

// A plan as graph::compile's auto_parallel keeps it.
class CompiledPlan final : public graph::ParallelPlan {
 public:
  explicit CompiledPlan(Plan plan) : plan_(std::move(plan)) {}
  std::string explain() const override { return plan_.explain(); }
  const Plan& plan() const { return plan_; }

 private:
  Plan plan_;
};

// `step` with each call's batch laid out as the plan says, run under the
// plan's script.
graph::TracedFn laid_out_step(const Plan& plan, graph::TracedFn step) {
  const Placement mesh = plan.mesh;
  std::vector<NdSbp> layouts;  // per input, in order
  for (bool found = true; found;) {
    found = false;
    for (const TensorChoice& choice : plan.tensors) {
      if (choice.name == "input " + std::to_string(layouts.size())) {
        layouts.push_back(choice.sbp);
        found = true;
        break;
      }
    }
  }
  std::vector<global::ScriptedSignature> signatures = plan.signatures();
  return [mesh, layouts, signatures, step = std::move(step)](const TensorVector& batch) {
    TESSERA_CHECK(batch.size() == layouts.size(), "[planner] the plan has ", layouts.size(),
                  " inputs; the step was called with ", batch.size());
    TensorVector laid_out;
    for (size_t k = 0; k < batch.size(); ++k) {
      const Tensor& whole = batch[k];
      laid_out.push_back(
          whole.is_global()
              ? whole.to_global(mesh, layouts[k])
              : whole.to_global(mesh, NdSbp::broadcast(mesh.ndim())).to_global(mesh, layouts[k]));
    }
    global::LayoutScript follow(signatures);
    return step(laid_out);
  };
}

[[maybe_unused]] const bool registered = [] {
  graph::set_auto_parallelizer(parallelize_step);
  return true;
}();

}  // namespace

graph::CompiledFunction compile(const Plan& plan, graph::TracedFn step,
                                graph::CompileOptions options) {
  return graph::compile(laid_out_step(plan, std::move(step)), std::move(options));
}

graph::ParallelStep parallelize_step(const graph::TracedFn& step, const TensorVector& inputs,
                                     const graph::CompileOptions& options) {
  MetaVector metas;  // logical, local
  for (size_t k = 0; k < inputs.size(); ++k) {
    TESSERA_CHECK(inputs[k].defined(), "[graph::compile] auto_parallel: input ", k,
                  " is an undefined tensor");
    metas.push_back({inputs[k].shape(), inputs[k].dtype(), inputs[k].device()});
  }
  graph::Graph traced;
  PlanOptions plan_options;
  plan_options.tape_keeps_inputs = false;
  {
    // The update is priced, not traced: state an optimizer made here would
    // be placeholders.
    optim::SkipUpdatesScope skip;
    try {
      traced = graph::trace(step, metas);
    } catch (const Error& error) {
      // A model laid out already fails here, mixing global parameters
      // with the trace's local inputs; say what auto_parallel expects.
      throw Error(std::string("[graph::compile] auto_parallel could not trace the step on local "
                              "tensors of its inputs' shapes (a model it plans must still be "
                              "local: it lays the parameters out itself): ") +
                  error.what());
    }
    plan_options.optimizer_states = std::max(0.0, skip.states_per_parameter());
  }
  for (size_t k = 0; k < traced.variables().size(); ++k) {
    const Tensor& tensor = traced.variables()[k].tensor;
    TESSERA_CHECK(!tensor.is_global(),
                  "[graph::compile] auto_parallel lays out a step's "
                  "parameters and buffers itself; variable ",
                  k, " of shape ", shape_str(tensor.shape()), " is already global on ",
                  placement_str(tensor.placement()), ". Plan a local model");
  }
  if (options.cost_model) plan_options.model = *options.cost_model;
  plan_options.mesh = options.mesh;
  plan_options.memory_budget = options.memory_budget;
  Plan result = plan(traced, plan_options, options.names);
  // The plan's tensors are the inputs, then the variables, in order.
  const size_t first = traced.inputs().size();
  for (size_t k = 0; k < traced.variables().size(); ++k) {
    const TensorChoice& choice = result.tensors.at(first + k);
    nn::to_global_in_place(traced.variables()[k].tensor, options.mesh, choice.sbp,
                           "[graph::compile] auto_parallel: '" + choice.name + "'");
  }
  graph::TracedFn laid_out = laid_out_step(result, step);
  return {std::move(laid_out), std::make_shared<const CompiledPlan>(std::move(result))};
}

const Plan& plan_of(const graph::CompiledFunction& function) {
  const auto* compiled = dynamic_cast<const CompiledPlan*>(function.parallel_plan());
  TESSERA_CHECK(compiled != nullptr,
                "[planner::plan_of] the function has no plan: it was compiled without "
                "auto_parallel, or has not been called yet (the first call plans)");
  return compiled->plan();
}

StepPrediction compiled_prediction(const graph::CompiledFunction& function) {
  StepPrediction p = plan_of(function).prediction;
  TESSERA_CHECK(function.compiles() > 0,
                "[planner::compiled_prediction] the step has not been compiled yet: its first "
                "call plans and runs it eagerly, the second compiles it");
  p.state_bytes -= std::exchange(p.gradient_bytes, 0.0);
  p.activation_bytes = static_cast<double>(function.last_planned_peak_bytes());
  p.peak_bytes = p.state_bytes + p.activation_bytes;
  return p;
}

}  // namespace tessera::planner
