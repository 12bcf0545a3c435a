#pragma once

// The layout decision of one op call on global tensors (DESIGN §4), made
// before anything runs: a pure function of the inputs' metadata. Eager
// dispatch executes it (boxing plans, then the local op on the shards);
// graph mode and the planner use the same decisions.

#include <optional>
#include <string>
#include <vector>

#include "tessera/global/boxing.h"
#include "tessera/ops/op.h"

namespace tessera::global {

struct LayoutDecision {
  const OpDef* op = nullptr;
  Placement placement;
  MetaVector inputs;   // as given (one-element local numbers join as broadcast)
  MetaVector outputs;  // logical outputs, with the chosen SBPs
  // The chosen signature: one NdSbp per input and output.
  std::vector<NdSbp> input_sbps;
  std::vector<NdSbp> output_sbps;
  std::vector<BoxingPlan> boxing;  // per input: from its layout to input_sbps
  double communication_seconds = 0;
  double compute_seconds = 0;  // the local op on the largest shards
  double seconds() const { return communication_seconds + compute_seconds; }

  // The next best signature that fits, priced the same way.
  struct Alternative {
    std::vector<NdSbp> input_sbps;
    std::vector<NdSbp> output_sbps;
    double communication_seconds = 0;
    double compute_seconds = 0;
    double seconds() const { return communication_seconds + compute_seconds; }
  };
  std::optional<Alternative> runner_up;
  // Signatures the op declares that do not hold for these shapes, and why
  // (e.g. a reshape whose rows do not split as its output's elements).
  std::vector<std::string> rejected;

  // The decision in words: chosen signature, its boxing and cost, the
  // runner-up and the gap.
  std::string explain() const;
};

// One way `op` can run on a placement: a signature per input and output,
// holding for the inputs' shapes, and the local op's time on the shards
// of the rank at index 0 (the largest, since uneven splits give the first
// parts the extra element).
struct LayoutOption {
  std::vector<size_t> choice;  // which of the op's signatures, per mesh axis
  std::vector<NdSbp> input_sbps;
  std::vector<NdSbp> output_sbps;
  double compute_seconds = 0;
};

// Every combination of op's signatures per mesh axis that holds for
// `inputs` (their shapes; their layouts are ignored) on `placement`, in the
// op's order, the last mesh axis varying fastest. An in-place op's options
// give each output in the layout of the input it writes. Signatures that
// do not hold on mesh axis 0, with why, are added to `rejected` if given.
// choose_layout prices these against the inputs' layouts; the planner
// searches over them for a whole graph.
std::vector<LayoutOption> layout_options(const OpDef& op, const MetaVector& inputs,
                                         const Attrs& attrs, const Placement& placement,
                                         const CostModel& model = default_cost_model(),
                                         std::vector<std::string>* rejected = nullptr);

// Chooses the signature for `op` on `inputs` (global metas on one
// placement; local one-element inputs join as broadcast): among the
// combinations of the op's signatures per mesh axis that hold for these
// shapes, the one whose boxing takes least time in `model`; equal
// communication goes to less compute, then to the op's order. Greedy per
// op: slicing a broadcast input to compute less would change the output's
// layout and cost later ops communication this decision cannot see, so
// compute only breaks ties (the planner weighs both over a whole graph).
// Raises, naming the layouts, when inputs are on different placements.
// "input 0: cpu:[0, 1] (S(0)), input 1: local [1]" for messages.
std::string layouts_str(const MetaVector& inputs);

LayoutDecision choose_layout(const OpDef& op, const MetaVector& inputs, const Attrs& attrs,
                             const CostModel& model = default_cost_model());

// The signature a plan chose for one op call.
struct ScriptedSignature {
  const OpDef* op = nullptr;
  std::vector<NdSbp> inputs;
  std::vector<NdSbp> outputs;
  std::vector<Shape> shapes;  // the inputs' logical shapes, to recognise the call
};

// Makes choose_layout follow a plan (the planner's, for a traced step:
// planner::Plan::script()) on this thread while it lives: each op call
// that is the script's next one (the same op on inputs of the same
// shapes; or one of the few after it, when eager issues calls the trace did
// not see, such as a loss's backward made of other ops) takes the scripted
// signature if that signature holds for the call's inputs; every other
// call chooses as usual. Scripts do not nest.
class LayoutScript {
 public:
  explicit LayoutScript(std::vector<ScriptedSignature> steps);
  ~LayoutScript();
  LayoutScript(const LayoutScript&) = delete;
  LayoutScript& operator=(const LayoutScript&) = delete;

  // Calls that took their scripted signature, and scripted calls that did
  // not (their signature did not hold, or no call matched them).
  int followed() const { return followed_; }
  int missed() const;
  // The scripted calls missed so far, one per line ("#5 matmul: (S(0), B) -> (S(0))").
  std::string missed_str() const;

  // For choose_layout: the scripted signature for a call of `op` on
  // `inputs`, if any (advancing past it), and whether it was taken.
  const ScriptedSignature* next(const OpDef& op, const MetaVector& inputs);
  void taken(bool yes);

 private:
  std::vector<ScriptedSignature> steps_;
  std::vector<bool> done_;
  size_t cursor_ = 0;
  int followed_ = 0;
};

}  // namespace tessera::global
