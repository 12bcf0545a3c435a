#include "tessera/planner/auto_parallel.h"

#include "tessera/graph/trace.h"

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

graph::CompiledFunction compile(const Plan& plan, graph::TracedFn step,
                                graph::CompileOptions options) {
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
  return graph::compile(
      [mesh, layouts, signatures, step = std::move(step)](const TensorVector& batch) {
        TESSERA_CHECK(batch.size() == layouts.size(), "[planner::compile] the plan has ",
                      layouts.size(), " inputs; the step was called with ", batch.size());
        TensorVector laid_out;
        for (size_t k = 0; k < batch.size(); ++k) {
          const Tensor& whole = batch[k];
          laid_out.push_back(whole.is_global()
                                 ? whole.to_global(mesh, layouts[k])
                                 : whole.to_global(mesh, NdSbp::broadcast(mesh.ndim()))
                                       .to_global(mesh, layouts[k]));
        }
        global::LayoutScript follow(signatures);
        return step(laid_out);
      },
      std::move(options));
}

}  // namespace tessera::planner
