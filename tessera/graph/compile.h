#pragma once

// graph::compile: an eager function traced into a graph once per input
// signature, optimised by the passes, and run from then on.
//
//   auto forward = graph::compile([&](const TensorVector& in) -> TensorVector {
//     return {model->forward(in[0])};
//   });
//   Tensor y = forward({x})[0];   // traces and compiles on the first call
//
// The first call runs `fn` eagerly: a training step makes its optimizer
// state and gradients there, so the trace that the second call makes sees
// them as variables. A step compiles whole, backward and update included:
//
//   auto step = graph::compile([&](const TensorVector& in) -> TensorVector {
//     optimizer.zero_grad();
//     Tensor loss = loss_fn(model->forward(in[0]), in[1]);
//     loss.backward();
//     optimizer.step();
//     return {loss};
//   });
//
// Plans are cached by every input's shape, dtype and device, and for a
// global input its placement and SBP. A call with a
// new signature compiles once more, and so does one after host state the
// plan baked in changed (an optimizer's learning rate); with
// TESSERA_GRAPH_EXPLAIN=1 in the environment it says on stderr what
// changed. A plan's outputs carry no autograd tape: compile the backward
// inside the function.
//
// A dim marked with graph::dynamic (graph/dynamic.h) may change size
// without a trace: the call re-plans the traced graph for the new size
// (shapes, passes, memory) and counts as a re-plan, not a compile.

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "tessera/global/cost_model.h"
#include "tessera/graph/dynamic.h"
#include "tessera/graph/executor.h"
#include "tessera/graph/ir.h"
#include "tessera/graph/trace.h"

namespace tessera::graph {

struct CompileOptions {
  // Passes to skip, by name (pass_names() lists them).
  std::vector<std::string> disabled_passes = {};

  // Auto-parallel (DESIGN §8, tessera/planner): the framework spreads a
  // step written for one device over `mesh`, choosing every layout.
  //
  //   auto step = graph::compile(train_step, {.mesh = Placement::cpu(4),
  //                                           .auto_parallel = true,
  //                                           .memory_budget = 2 << 30});
  //   Tensor loss = step({x, y})[0];  // x, y: the whole batch, the same on every rank
  //   std::cout << step.parallel_plan()->explain();
  //
  // On the first call, before anything runs, the step is traced on its
  // inputs (local tensors of the whole batch, or global ones), with every
  // optimizer's update left out (optim::SkipUpdatesScope; the planner
  // prices it from the state the optimizer reports). It is planned for
  // `mesh` under `memory_budget` bytes per rank (0: no limit), and every
  // parameter and buffer the step reads, which must still be local, is
  // laid out on the mesh as the plan says, in place (the module, the
  // optimizer and the caller's handles all hold the global tensor). Each
  // call then lays its inputs out as the plan says and runs the plan's
  // signature for each op: eagerly the first time (making the optimizer's
  // state, in its parameter's layout), compiled after.
  Placement mesh = {};
  bool auto_parallel = false;
  double memory_budget = 0;
  // Names for the plan's tensors (a module's named_parameters()); others
  // are "variable k".
  std::vector<std::pair<std::string, Tensor>> names = {};
  // The profile to plan with (tessera-calibrate's, or a declared one);
  // none: TESSERA_COST_PROFILE's, or the defaults.
  std::optional<global::CostModel> cost_model = {};
};

// What auto_parallel made of a step: its plan, as the planner explains it
// (planner::plan_of gives the planner's Plan).
class ParallelPlan {
 public:
  virtual ~ParallelPlan() = default;
  virtual std::string explain() const = 0;
};

// The planner's part of auto_parallel: plans `step` from its first call's
// `inputs`, lays out the variables it reads, and returns the function each
// call runs instead (the inputs laid out, under the plan's signatures) with
// the plan. The planner library sets it when it loads.
struct ParallelStep {
  TracedFn step;
  std::shared_ptr<const ParallelPlan> plan;
};
using AutoParallelizer = std::function<ParallelStep(
    const TracedFn& step, const TensorVector& inputs, const CompileOptions& options)>;
void set_auto_parallelizer(AutoParallelizer parallelizer);

// With TESSERA_GRAPH_DUMP=dir in the environment, each compile writes its
// graph as traced and after every pass, as text (.txt) and Graphviz (.dot):
// dir/compile<k>_<nn>_<stage>.txt, k counting compiles in the process; in a
// job of several ranks, dir/rank<r>_compile<k>_<nn>_<stage>.txt.
class GraphDump {
 public:
  GraphDump();  // reads the environment; does nothing when unset
  void write(const std::string& stage, const Graph& graph);

 private:
  std::string folder_;
  int compile_ = 0;
  int step_ = 0;
};

// The passes compile runs, in order.
const std::vector<std::string>& pass_names();
// Raises an error listing the valid names if one of `names` is not a pass.
void check_pass_names(const std::vector<std::string>& names);
// Runs every pass not disabled; an unknown name is an error listing the
// valid ones.
// `dump`: write TESSERA_GRAPH_DUMP's files (not for a dynamic dim's probes).
Graph run_passes(const Graph& graph, const std::vector<std::string>& disabled = {},
                 bool dump = true);

class CompiledFunction {
 public:
  CompiledFunction(TracedFn fn, CompileOptions options);

  TensorVector operator()(const TensorVector& inputs);

  // At most this many plans are kept (each holds its arena): beyond it,
  // the one used least recently is dropped, and its signature plans again
  // when it comes back (a re-plan where a dynamic dim allows).
  static constexpr size_t kMaxPlans = 16;

  // How many times the function was traced and compiled (the probe traces
  // of a dynamic dim not counted).
  int compiles() const { return compiles_; }
  // How many plans were made for new dynamic sizes without a trace.
  int replans() const { return replans_; }
  // Seconds spent tracing and planning (the compiles, probe traces
  // included), and re-planning.
  double compile_seconds() const { return compile_seconds_; }
  double replan_seconds() const { return replan_seconds_; }
  // With CompileOptions::auto_parallel, the plan the first call made (none
  // before it).
  const ParallelPlan* parallel_plan() const { return parallel_plan_.get(); }
  // The graph the last call ran, and its memory plan.
  const Graph& last_graph() const;
  const MemoryPlan& last_memory_plan() const;
  // The most memory the last call's plan holds during a run
  // (Executor::planned_peak_bytes).
  int64_t last_planned_peak_bytes() const;

 private:
  struct Plan {
    MetaVector signature;
    std::shared_ptr<Executor> executor;
    uint64_t used = 0;  // when it last ran, in calls
  };
  Plan compile_plan(const MetaVector& signature, const TensorVector& inputs);
  const Plan& plan_for(const TensorVector& inputs);
  // Keeps `plan` (dropping the least recently used beyond kMaxPlans) and
  // makes it the last.
  const Plan& add_plan(Plan plan);
  // A plan for `signature` from a template of the dynamic dims, if one
  // fits and re-plans; none otherwise.
  std::optional<Plan> replan(const MetaVector& signature);
  void note_marks(const TensorVector& inputs);
  bool has_marks() const;

  TracedFn fn_;
  CompileOptions options_;
  std::shared_ptr<const ParallelPlan> parallel_plan_;
  std::vector<Plan> plans_;
  // Per input position, the dims ever marked dynamic.
  std::vector<std::vector<int64_t>> marks_;
  // A template of the dynamic dims, and the memory placement its compile
  // chose (a re-plan keeps it rather than trying every one again).
  struct Template {
    std::shared_ptr<const ShapeTemplate> shapes;
    int memory_variant = -1;
    bool optimised = false;  // of the graph after the passes: a re-plan runs none
  };
  std::vector<Template> templates_;
  // A template that could not re-plan this call's sizes: dropped when the
  // trace that follows succeeds.
  std::shared_ptr<const ShapeTemplate> failed_template_;
  bool dynamic_refused_ = false;  // the function cannot have dynamic dims
  int compiles_ = 0;
  int replans_ = 0;
  double compile_seconds_ = 0;
  double replan_seconds_ = 0;
  int last_ = -1;
  uint64_t calls_ = 0;
  bool warmed_up_ = false;
};

CompiledFunction compile(TracedFn fn, CompileOptions options = {});

}  // namespace tessera::graph
