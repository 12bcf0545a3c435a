// Global dispatch (DESIGN §3-4): an op called with global inputs picks, per
// mesh axis, the SBP signature whose boxing from the inputs' SBPs costs
// least, boxes the inputs to it, runs the ordinary local op on the shards
// and wraps the results. Every rank decides from metadata alone, so all
// ranks agree without talking.

#include <cstdlib>
#include <optional>
#include <string>

#include "tessera/core/grad_mode.h"
#include "tessera/core/shard_trace.h"
#include "tessera/distributed/spmd_check.h"
#include "tessera/global/boxing.h"
#include "tessera/global/choose_layout.h"
#include "tessera/global/conversions.h"
#include "tessera/global/layout.h"
#include "tessera/global/process_groups.h"
#include "tessera/ops/creation.h"
#include "tessera/ops/dispatch.h"
#include "tessera/ops/layout_attrs.h"

namespace tessera {

namespace {

// TESSERA_DEBUG_SPMD=1: every collective compares, across its group, what
// each rank issues (distributed/spmd_check.h). A global op joins in with a
// barrier on its placement, so ops that move no data are compared too, and
// names itself for the collectives it issues.
void check_same_op_everywhere(const Placement& placement) {
  if (!placement.contains(global::world_rank())) return;
  global::group_of(placement.ranks())->barrier();
}

int index_in(const Placement& placement) {
  return placement.index_of(global::world_rank());
}

// An in-place op on global tensors: a local input other than a number is
// the logical value (every rank passes the same one), of which each rank
// takes its region, as a broadcast layout would give it.
std::vector<Tensor> in_place_inputs(const OpDef& op, const std::vector<Tensor>& given) {
  std::vector<Tensor> inputs = given;
  Placement placement;
  for (int w : op.writes) {
    const Tensor& written = given.at(static_cast<size_t>(w));
    TESSERA_CHECK(written.is_global(), "[", op.name, "] writes input ", w, " in place, a local ",
                  shape_str(written.shape()), " tensor, while other inputs are global; make it ",
                  "global first");
    placement = written.placement();
  }
  const Tensor& first_written = given.at(static_cast<size_t>(op.writes[0]));
  for (Tensor& input : inputs) {
    if (input.is_global()) {
      // A source on another placement (another mesh, a pipeline stage)
      // comes over first, in the destination's layout when it has its shape.
      if (!(input.placement() == placement)) {
        input =
            input.shape() == first_written.shape()
                ? input.to_global(placement, first_written.nd_sbp())
                : input.to_global(placement, global::uniform(Sbp::broadcast(), placement.ndim()));
      }
      continue;
    }
    if (input.numel() == 1) continue;
    const NdSbp broadcast = global::uniform(Sbp::broadcast(), placement.ndim());
    input = input.is_meta() && !tracing_shards()
                ? make_global_meta(input.shape(), input.dtype(), placement, broadcast)
                : make_global(input.detach(), input.shape(), input.dtype(), placement, broadcast);
  }
  return inputs;
}

// Executes a decision on this rank: each input's boxing plan, then the
// local op on the shards. Returns the local outputs (none outside the
// placement).
std::vector<Tensor> run_on_shards(const OpDef& op, const std::vector<Tensor>& inputs,
                                  const MetaVector& metas, const Attrs& attrs,
                                  const global::LayoutDecision& decision) {
  const Placement& placement = decision.placement;
  const int index = index_in(placement);
  std::vector<Tensor> locals;
  MetaVector local_metas;
  ShardOffsets offsets;
  for (size_t i = 0; i < inputs.size(); ++i) {
    Tensor input = inputs[i].is_global()
                       ? inputs[i]
                       : make_global(inputs[i], inputs[i].shape(), inputs[i].dtype(), placement,
                                     decision.inputs[i].sbp);
    const global::BoxingPlan& plan = decision.boxing[i];
    Tensor boxed = plan.steps.empty() ? input : global::run_boxing(plan, input);
    if (index < 0) continue;
    locals.push_back(boxed.local_shard());
    local_metas.push_back(locals.back().meta());
    offsets.push_back(
        global::shard_region(metas[i].shape, placement, decision.input_sbps[i], index).start);
  }
  if (index < 0) return {};
  Attrs local_attrs =
      op.localize ? op.localize(attrs, local_metas, decision.inputs, offsets) : attrs;
  static const OpDef& reshape = find_op("reshape");
  if (&op == &reshape) {
    // A shard its new shape cannot view is copied first, as its own op
    // (Tensor::reshape): a traced graph then holds the copy as a node whose
    // memory the graph's memory plan places, and the reshape stays a view.
    return {locals[0].reshape(local_attrs.ints("shape"))};
  }
  return call(op, locals, local_attrs);
}

// Decides (choose_layout), then executes the decision: each input's
// boxing plan, the local op on this rank's shards, the outputs wrapped.
std::vector<Tensor> global_call(const OpDef& op, const std::vector<Tensor>& given,
                                const Attrs& attrs) {
  TESSERA_CHECK(op.kind != OpKind::collective, "[", op.name, "] is a collective on local ",
                "tensors (each rank passes its own); a global tensor moves with ",
                "to_global(placement, sbp), or pass x.to_local()");
  const std::vector<Tensor> inputs = op.writes.empty() ? given : in_place_inputs(op, given);
  MetaVector metas;
  metas.reserve(inputs.size());
  bool meta = false;
  for (const Tensor& input : inputs) {
    metas.push_back(input.meta());
    // Under a trace a meta tensor stands for a real one (core/shard_trace.h).
    meta = meta || (input.is_meta() && !tracing_shards());
  }
  std::optional<distributed::SpmdScope> spmd_scope;
  const global::LayoutDecision decision = global::choose_layout(op, metas, attrs);
  const Placement& placement = decision.placement;
  if (distributed::spmd_check_enabled() && !meta) {
    spmd_scope.emplace(str_cat(op.name, "(", global::layouts_str(metas), ")"));
    check_same_op_everywhere(placement);
  }
  if (!op.writes.empty()) {
    // The written inputs kept their layout (choose_layout pins it): their
    // shards were written where they are.
    if (!meta) run_on_shards(op, inputs, metas, attrs, decision);
    std::vector<Tensor> outputs;
    for (int w : op.writes) outputs.push_back(inputs[static_cast<size_t>(w)]);
    return outputs;
  }
  if (meta) {
    std::vector<Tensor> outputs;
    for (const TensorMeta& out : decision.outputs) {
      outputs.push_back(make_global_meta(out.shape, out.dtype, placement, out.sbp));
    }
    return outputs;
  }

  const int index = index_in(placement);
  std::vector<Tensor> local_outputs = run_on_shards(op, inputs, metas, attrs, decision);
  std::vector<Tensor> outputs;
  for (size_t o = 0; o < decision.outputs.size(); ++o) {
    const TensorMeta& out = decision.outputs[o];
    Tensor local;
    if (index >= 0) {
      local = local_outputs[o];
      Shape expected = global::local_shape(out.shape, placement, out.sbp, index);
      TESSERA_CHECK(local.shape() == expected, "[", op.name, "] internal error: signature gave a ",
                    "shard of shape ", shape_str(local.shape()), " where ", shape_str(expected),
                    " was expected for ", nd_sbp_str(out.sbp), " of ", shape_str(out.shape));
    }
    outputs.push_back(make_global(local, out.shape, out.dtype, placement, out.sbp));
  }
  return outputs;
}

// A factory asked for a global tensor (ops/creation.h): each rank builds
// its shard with the local op. full fills its shard (zeros where a partial
// axis is not at its first coordinate); rand and randn draw their shard's
// box of the logical tensor's counters (element i uses counter i whatever
// the layout; the caller reserved the whole tensor's counters on every
// rank). A partial random layout is built from the broadcast one (values on
// one rank, zeros on the others), which needs the whole tensor there.
Tensor run_factory(const OpDef& op, const Attrs& attrs) {
  const Placement placement = placement_attr(attrs);
  const NdSbp sbp = sbp_attr(attrs);
  const Shape& shape = attrs.ints("shape");
  const DType dtype = attrs.get<DType>("dtype");
  global::check_layout(shape, placement, sbp, op.name.c_str());
  Attrs local_attrs = attrs;
  erase_layout_attrs(local_attrs);
  const bool random = op.kind == OpKind::random;
  TESSERA_CHECK(op.name == "full" || op.name == "rand" || op.name == "randn", "[", op.name,
                "] has no global version; valid: full, zeros, ones, rand, randn");
  if (random && sbp.any_partial()) {
    Tensor whole = call1(op, {}, local_attrs);
    Tensor broadcast = make_global(whole, shape, dtype, placement,
                                   global::uniform(Sbp::broadcast(), placement.ndim()));
    return global::box(broadcast, placement, sbp);
  }
  const int index = index_in(placement);
  if (index < 0) return make_global(Tensor(), shape, dtype, placement, sbp);
  const global::Region region = global::shard_region(shape, placement, sbp, index);
  local_attrs.set("shape", region.size);
  if (random) {
    local_attrs.set("logical_shape", shape).set("region_start", region.start);
  } else {
    const std::vector<int64_t> coord = placement.coordinate(index);
    for (int a = 0; a < sbp.ndim(); ++a) {
      if (sbp[a].kind == SbpKind::partial_sum && coord[static_cast<size_t>(a)] != 0) {
        local_attrs.set("value", 0.0).erase("int_value");
      }
    }
  }
  return make_global(call1(op, {}, local_attrs), shape, dtype, placement, sbp);
}

class GlobalHandler final : public Handler {
 public:
  const char* name() const override { return "eager-global"; }
  TensorVector run(const OpDef& op, const TensorVector& inputs, const Attrs& attrs) override {
    if (op.global_only) return global::run_conversion(op, inputs, attrs);
    if (inputs.empty()) return {run_factory(op, attrs)};
    return global_call(op, inputs, attrs);
  }
};

GlobalHandler global_handler;
const bool installed = [] {
  set_handler(DispatchKey::global, &global_handler);
  return true;
}();

}  // namespace

}  // namespace tessera
