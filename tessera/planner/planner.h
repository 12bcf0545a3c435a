#pragma once

// Auto-parallel (DESIGN §8): a layout for every tensor of a traced step,
// chosen for a mesh by the one cost model, with the reasons and the
// predicted step time and memory per rank, before anything runs.
//
//   graph::Graph step = graph::trace(train_step, {x, y});   // one device
//   planner::PlanOptions options;
//   options.mesh = Placement::cpu(4);
//   options.memory_budget = 2 << 30;
//   planner::Plan plan = planner::plan(step, options, model->named_parameters());
//   std::cout << plan.explain();
//
// The graph is the logical step (traced on local tensors of the whole
// batch). Every op node chooses one of the layout options choose_layout
// would weigh for it (global::layout_options), every input and variable a
// layout (broadcast or split on each mesh axis), and each value pays the
// boxing (global::plan_boxing) from its producer's layout to the one its
// consumer takes. A gradient written to a parameter pays the boxing into
// the parameter's layout; that traffic overlaps the backward pass that
// follows it, as the gradient buckets do. Memory per rank counts each
// parameter's shard with its gradient and optimizer state, and the
// activations the step's order keeps alive at its peak (with a gradient as
// made beside its boxed copy, and a bucket's partial sums beside their
// concatenation while it is reduced).

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "tessera/global/choose_layout.h"
#include "tessera/global/cost_model.h"
#include "tessera/global/gradient_buckets.h"
#include "tessera/graph/ir.h"
#include "tessera/nn/module.h"
#include "tessera/planner/cost_graph.h"

namespace tessera::planner {

struct PlanOptions {
  Placement mesh;  // 1-D or 2-D
  global::CostModel model = global::default_cost_model();
  // Bytes per rank the plan may use; 0: no limit.
  double memory_budget = 0;
  // Optimizer state per trained parameter element, in parameter sizes
  // (Adam and AdamW: 2, SGD with momentum: 1, plain SGD: 0).
  double optimizer_states = 2;
  // Whether gradient traffic overlaps the backward compute after it (the
  // gradient buckets reduce on a communication thread), where the model
  // says collectives overlap compute at all (CostModel::overlaps_communication).
  bool overlap_gradients = true;
  // Micro-batches the step's gradients accumulate over before they are
  // reduced and applied (a pipeline stage's step is one micro-batch): the
  // search weighs gradient traffic and the optimizer update once per this
  // many runs of the rest of the step.
  int64_t micro_batches = 1;
  // How kernels are priced. false: every op reads its inputs from memory
  // and writes its outputs there (eager, and graph mode outside its fused
  // elementwise chains). true: an elementwise op's result whose only reader
  // is the next elementwise, reduction or normalization op stays on chip,
  // as a fusing compiler's kernels and Megatron-LM's fused kernels (scale,
  // mask and softmax; bias and GELU) keep it; that op runs inside its
  // reader's kernel, without a launch of its own.
  bool fuse_elementwise = false;
  // How long the step's activations live. true: Tessera's eager autograd
  // tape keeps every input of an op that saves its inputs until that op's
  // backward. false: each value is freed after its last read (a compiled
  // graph; PyTorch's autograd, which saves only what gradients read).
  bool tape_keeps_inputs = true;
  // How gradients that differ from their parameter's layout only by
  // partial sums are reduced: as eager's gradient buckets do (global/
  // gradient_reducer.cpp), held until this many bytes of them wait (or
  // backward ends) and then reduced as one concatenated copy; 0: each is
  // reduced on its own as it is made.
  double gradient_bucket_bytes = static_cast<double>(global::kGradientBucketBytes);
  // Layouts fixed in advance, by tensor name (a parameter's qualified name,
  // or "input 0", "input 1", ... for the step's inputs); the rest is planned.
  std::map<std::string, NdSbp> pinned;
  SearchOptions search;
};

// The layout chosen for a tensor the step does not compute.
struct TensorChoice {
  std::string name;      // parameter name, "input k", or "variable k"
  TensorMeta meta;       // logical
  bool trained = false;  // a gradient is written to it
  NdSbp sbp;
  std::optional<NdSbp> runner_up;
  double gap_seconds = 0;  // objective of the runner-up minus the chosen
};

// The signature chosen for an op node.
struct OpChoice {
  int node = -1;
  std::string op;
  const OpDef* def = nullptr;
  std::vector<Shape> shapes;  // its inputs' logical shapes
  std::vector<NdSbp> inputs;
  std::vector<NdSbp> outputs;
  double compute_seconds = 0;  // on the largest shards
  double boxing_seconds = 0;   // moving its inputs into these layouts
  std::optional<std::vector<NdSbp>> runner_up_inputs;
  std::vector<NdSbp> runner_up_outputs;
  double gap_seconds = 0;
};

// What one step is predicted to cost on each rank (the busiest: the
// largest shards).
struct StepPrediction {
  double compute_seconds = 0;
  double communication_seconds = 0;  // all boxing, gradients included
  double exposed_seconds = 0;        // the communication not overlapped
  double step_seconds = 0;           // compute + exposed communication
  double state_bytes = 0;            // parameters, gradients, optimizer state
  double gradient_bytes = 0;         // of which gradients
  double activation_bytes = 0;       // peak of everything else alive
  double peak_bytes = 0;
  double flops = 0;  // whole-step FLOPs on one rank
  // The parts a pipeline schedule composes (planner/pipeline.h):
  double forward_seconds = 0;      // to the node that makes the step's first output
  double micro_batch_seconds = 0;  // compute and blocking boxing, no gradient traffic or update
  double update_seconds = 0;       // the optimizer's update
  // Gradient traffic still running after the last compute (all of it where
  // it does not overlap): step = micro_batch + gradient_tail + update.
  double gradient_tail_seconds = 0;
  double saved_bytes = 0;  // activations alive when the forward pass ends (kept for backward)
};

class Plan {
 public:
  Placement mesh;
  std::vector<TensorChoice> tensors;
  std::vector<OpChoice> ops;
  StepPrediction prediction;
  double objective = 0;  // the search's objective at this plan
  double memory_budget = 0;
  double search_seconds = 0;
  bool exact = false;    // the search proved it optimal
  // Proven: no plan's objective is lower (the objective when exact; an
  // integer program's bound when it ran and did not finish; else 0).
  double lower_bound = 0;
  // The search's answer was predicted slower than data parallelism (its
  // summed costs count gradient traffic the step hides), so this is the
  // data-parallel start instead.
  bool kept_data_parallel = false;
  int choice_nodes = 0;  // in the cost graph
  int remaining = 0;     // left after elimination

  // The layout chosen for a tensor by name; raises naming the choices when
  // there is none of that name.
  const NdSbp& sbp_of(const std::string& name) const;
  // How good the search proved the plan: "proven optimal", "best found,
  // at most 2.1% above the optimum", or "best found" (nothing proven).
  std::string search_result() const;
  // Per tensor and op: chosen layout, runner-up and the gap; then the
  // predicted step (compute / communication / exposed) and peak memory.
  std::string explain() const;
  // Graphviz: the op nodes and tensors, coloured by layout.
  std::string dot() const;
  // The tensors' layouts as JSON ({"mesh": [...], "tensors": {name: ["S(0)", "B"]}}),
  // to save, edit and pass back as PlanOptions::pinned.
  std::string to_json() const;
  // Makes eager global dispatch on this thread take the plan's signature
  // for each op call of the step while the script lives (otherwise each
  // call chooses greedily from its inputs' layouts):
  //   { global::LayoutScript follow = plan.script(); loss = ...; loss.backward(); }
  std::vector<global::ScriptedSignature> signatures() const;
  global::LayoutScript script() const { return global::LayoutScript(signatures()); }

  // For dot(): each op node's inputs as (value producer node or -1, tensor index).
  std::vector<std::vector<std::pair<int, int>>> op_inputs;
};

// How explain() prints a time ("12.3 ms", "950 us") and bytes ("1.50 MiB").
std::string seconds_str(double seconds);
std::string mib_str(double bytes);

// Parses to_json()'s text into pins for PlanOptions::pinned; raises on
// malformed text, naming the entry.
std::map<std::string, NdSbp> pins_from_json(const std::string& text, int mesh_ndim);
// "S(0)", "B", "P(sum)": one mesh axis's layout.
Sbp parse_sbp(const std::string& text);

// What plan() raises when no plan fits options.memory_budget.
class BudgetError : public Error {
 public:
  using Error::Error;
};

// Plans `graph` (a logical step) for options.mesh. `names` names the
// graph's variables (a module's named_parameters()); others are
// "variable k". Raises when options.memory_budget cannot be met, naming
// the smallest budget the search found and what takes it (a BudgetError).
Plan plan(const graph::Graph& graph, const PlanOptions& options,
          const nn::Module::NamedTensors& names = {});

// The cost graph plan() searches, for tests that check the search against
// trying every assignment.
CostGraph cost_graph_of(const graph::Graph& graph, const PlanOptions& options,
                        const nn::Module::NamedTensors& names = {});

}  // namespace tessera::planner
