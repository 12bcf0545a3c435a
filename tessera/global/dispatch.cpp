// Global dispatch (DESIGN §3-4): an op called with global inputs picks, per
// mesh axis, the SBP signature whose boxing from the inputs' SBPs costs
// least, boxes the inputs to it, runs the ordinary local op on the shards
// and wraps the results. Every rank decides from metadata alone, so all
// ranks agree without talking.

#include <cstdlib>
#include <limits>
#include <optional>
#include <string>

#include "tessera/core/grad_mode.h"
#include "tessera/distributed/spmd_check.h"
#include "tessera/global/boxing.h"
#include "tessera/global/layout.h"
#include "tessera/global/process_groups.h"
#include "tessera/ops/creation.h"
#include "tessera/ops/op.h"

namespace tessera {

namespace {

std::string layouts_str(const std::vector<Tensor>& inputs) {
  std::string text;
  for (size_t i = 0; i < inputs.size(); ++i) {
    text += (i ? ", " : "") + std::string("input ") + std::to_string(i) + ": ";
    text += inputs[i].is_global()
                ? placement_str(inputs[i].placement()) + " " + nd_sbp_str(inputs[i].nd_sbp())
                : "local " + shape_str(inputs[i].shape());
  }
  return text;
}

std::string signatures_str(const std::vector<SbpSignature>& signatures) {
  std::string text;
  for (const SbpSignature& signature : signatures) text += "\n  " + signature_str(signature);
  return text;
}

// Logical bytes of one input a mesh axis moves: its size over the other
// axes that split it.
double axis_bytes(const TensorMeta& meta, const Placement& placement, int axis) {
  double bytes =
      static_cast<double>(numel(meta.shape)) * static_cast<double>(dtype_size(meta.dtype));
  for (int a = 0; a < placement.ndim(); ++a) {
    if (a != axis && meta.sbp[a].is_split())
      bytes /= static_cast<double>(placement.mesh()[static_cast<size_t>(a)]);
  }
  return bytes;
}

// Whether running the local op on the shards `signature` gives each of the
// `parts` ranks of one mesh axis exactly its shard of the outputs. A
// signature can hold for some splits and not others: reshape [5, 3] ->
// [15] keeps S(0) only when the rows split as the output's elements do.
bool fits_layout(const OpDef& op, const SbpSignature& signature,
                 const std::vector<TensorMeta>& metas, const std::vector<TensorMeta>& outputs,
                 const Attrs& attrs, int64_t parts) {
  for (int64_t c = 0; c < parts; ++c) {
    std::vector<TensorMeta> local = metas;
    ShardOffsets offsets;
    for (size_t i = 0; i < metas.size(); ++i) {
      local[i].placement = Placement();
      local[i].sbp = NdSbp();
      std::vector<int64_t> start(metas[i].shape.size(), 0);
      if (signature.inputs[i].is_split()) {
        const auto d = static_cast<size_t>(signature.inputs[i].axis);
        global::Range r = global::split_range(metas[i].shape[d], parts, c);
        local[i].shape[d] = r.size;
        start[d] = r.start;
      }
      offsets.push_back(start);
    }
    std::vector<TensorMeta> got;
    try {
      Attrs local_attrs = op.localize ? op.localize(attrs, local, metas, offsets) : attrs;
      got = op.infer(local, local_attrs);
    } catch (const std::exception&) {
      return false;
    }
    for (size_t o = 0; o < outputs.size(); ++o) {
      Shape want = outputs[o].shape;
      if (signature.outputs[o].is_split()) {
        const auto d = static_cast<size_t>(signature.outputs[o].axis);
        want[d] = global::split_range(want[d], parts, c).size;
      }
      if (got.at(o).shape != want) return false;
    }
  }
  return true;
}

// On an n-D mesh the per-axis choices must also compose: every rank's
// shards, split by all axes at once, must give its output shards.
bool composes(const OpDef& op, const Placement& placement,
              const std::vector<std::vector<Sbp>>& input_sbps,
              const std::vector<std::vector<Sbp>>& output_sbps,
              const std::vector<TensorMeta>& metas, const std::vector<TensorMeta>& outputs,
              const Attrs& attrs) {
  for (int index = 0; index < placement.size(); ++index) {
    std::vector<TensorMeta> local = metas;
    ShardOffsets offsets;
    for (size_t i = 0; i < metas.size(); ++i) {
      global::Region region =
          global::shard_region(metas[i].shape, placement, NdSbp(input_sbps[i]), index);
      local[i] = {region.size, metas[i].dtype, metas[i].device};
      offsets.push_back(region.start);
    }
    try {
      Attrs local_attrs = op.localize ? op.localize(attrs, local, metas, offsets) : attrs;
      std::vector<TensorMeta> got = op.infer(local, local_attrs);
      for (size_t o = 0; o < outputs.size(); ++o) {
        if (got.at(o).shape !=
            global::local_shape(outputs[o].shape, placement, NdSbp(output_sbps[o]), index)) {
          return false;
        }
      }
    } catch (const std::exception&) {
      return false;
    }
  }
  return true;
}

// TESSERA_DEBUG_SPMD=1: every collective compares, across its group, what
// each rank issues (distributed/spmd_check.h). A global op joins in with a
// barrier on its placement, so ops that move no data are compared too, and
// names itself for the collectives it issues.
void check_same_op_everywhere(const Placement& placement) {
  if (!placement.contains(global::world_rank())) return;
  global::group_of(placement.ranks())->barrier();
}

}  // namespace

std::vector<Tensor> global_call(const OpDef& op, const std::vector<Tensor>& inputs,
                                const Attrs& attrs) {
  // One placement for all global inputs; one-element local inputs (scalars
  // made inside ops) join as broadcast.
  Placement placement;
  for (const Tensor& input : inputs) {
    if (!input.is_global()) continue;
    if (!placement.defined()) placement = input.placement();
    TESSERA_CHECK(input.placement() == placement, "[", op.name,
                  "] global inputs must share one placement; got ", layouts_str(inputs),
                  ". Move them with to_global(placement, sbp) first");
  }
  std::optional<distributed::SpmdScope> spmd_scope;
  if (distributed::spmd_check_enabled()) {
    spmd_scope.emplace(str_cat(op.name, "(", layouts_str(inputs), ")"));
    check_same_op_everywhere(placement);
  }
  const NdSbp all_broadcast = global::uniform(Sbp::broadcast(), placement.ndim());
  std::vector<Tensor> global_inputs;
  std::vector<TensorMeta> metas;
  for (size_t i = 0; i < inputs.size(); ++i) {
    Tensor input = inputs[i];
    if (!input.is_global()) {
      TESSERA_CHECK(input.numel() == 1, "[", op.name, "] input ", i, " is a local tensor of shape ",
                    shape_str(input.shape()), " while others are global (", layouts_str(inputs),
                    "); make it global with to_global(placement, sbp)");
      input = make_global(input, input.shape(), input.dtype(), placement, all_broadcast);
    }
    global_inputs.push_back(input);
    metas.push_back(input.meta());
  }
  std::vector<TensorMeta> output_metas = op.infer(metas, attrs);
  std::vector<SbpSignature> signatures = sbp_signatures(op, metas, attrs);

  // Per mesh axis, the cheapest signature; ties go to the op's order.
  std::vector<std::vector<Sbp>> input_sbps(inputs.size()), output_sbps(output_metas.size());
  for (int axis = 0; axis < placement.ndim(); ++axis) {
    const int64_t parts = placement.mesh()[static_cast<size_t>(axis)];
    const SbpSignature* best = nullptr;
    double best_cost = std::numeric_limits<double>::infinity();
    for (const SbpSignature& signature : signatures) {
      double cost = 0;
      for (size_t i = 0; i < metas.size(); ++i) {
        cost += global::boxing_cost(metas[i].sbp[axis], signature.inputs[i],
                                    axis_bytes(metas[i], placement, axis), parts);
      }
      if (cost < best_cost && fits_layout(op, signature, metas, output_metas, attrs, parts)) {
        best_cost = cost;
        best = &signature;
      }
    }
    TESSERA_CHECK(best != nullptr, "[", op.name, "] has no SBP signature for ", layouts_str(inputs),
                  "; valid signatures:", signatures_str(signatures));
    for (size_t i = 0; i < inputs.size(); ++i) input_sbps[i].push_back(best->inputs[i]);
    for (size_t o = 0; o < output_metas.size(); ++o) output_sbps[o].push_back(best->outputs[o]);
  }

  // Axes whose choices do not compose fall back to broadcast, innermost first
  // (all-broadcast always holds).
  for (int axis = placement.ndim();
       placement.ndim() > 1 && axis-- > 0 &&
       !composes(op, placement, input_sbps, output_sbps, metas, output_metas, attrs);) {
    for (auto& sbps : input_sbps) sbps[static_cast<size_t>(axis)] = Sbp::broadcast();
    for (auto& sbps : output_sbps) sbps[static_cast<size_t>(axis)] = Sbp::broadcast();
  }

  const int index = placement.index_of(global::world_rank());
  std::vector<Tensor> locals;
  std::vector<TensorMeta> local_metas;
  ShardOffsets offsets;
  for (size_t i = 0; i < inputs.size(); ++i) {
    NdSbp sbp(input_sbps[i]);
    Tensor boxed = global_inputs[i].nd_sbp() == sbp ? global_inputs[i]
                                                    : global::box(global_inputs[i], placement, sbp);
    if (index < 0) continue;
    locals.push_back(boxed.local_shard());
    local_metas.push_back(locals.back().meta());
    offsets.push_back(global::shard_region(metas[i].shape, placement, sbp, index).start);
  }

  std::vector<Tensor> outputs;
  std::vector<Tensor> local_outputs;
  if (index >= 0) {
    Attrs local_attrs = op.localize ? op.localize(attrs, local_metas, metas, offsets) : attrs;
    local_outputs = call(op, locals, local_attrs);
  }
  for (size_t o = 0; o < output_metas.size(); ++o) {
    NdSbp sbp(output_sbps[o]);
    Tensor local;
    if (index >= 0) {
      local = local_outputs[o];
      Shape expected = global::local_shape(output_metas[o].shape, placement, sbp, index);
      TESSERA_CHECK(local.shape() == expected, "[", op.name, "] internal error: signature gave a ",
                    "shard of shape ", shape_str(local.shape()), " where ", shape_str(expected),
                    " was expected for ", nd_sbp_str(sbp), " of ",
                    shape_str(output_metas[o].shape));
    }
    outputs.push_back(
        make_global(local, output_metas[o].shape, output_metas[o].dtype, placement, sbp));
  }
  return outputs;
}

void global_copy_(const Tensor& dst, const Tensor& src) {
  NoGradGuard no_grad;
  const int index = dst.placement().index_of(global::world_rank());
  Tensor local = dst.local_shard();
  if (src.is_global()) {
    TESSERA_CHECK(src.shape() == dst.shape(), "[copy_] source of shape ", shape_str(src.shape()),
                  " differs from the global destination's ", shape_str(dst.shape()));
    Tensor boxed = src.to(dst.dtype());
    if (!(boxed.placement() == dst.placement() && boxed.nd_sbp() == dst.nd_sbp())) {
      boxed = global::box(boxed, dst.placement(), dst.nd_sbp());
    }
    if (index >= 0) local.copy_(boxed.local_shard());
    return;
  }
  if (index < 0) return;
  // A local source is the logical value: each rank keeps its region of it.
  Shape target = broadcast_shapes(src.shape(), dst.shape(), "copy_");
  TESSERA_CHECK(target == dst.shape(), "[copy_] source of shape ", shape_str(src.shape()),
                " does not broadcast to the destination's shape ", shape_str(dst.shape()));
  std::vector<int64_t> coord = dst.placement().coordinate(index);
  for (int a = 0; a < dst.nd_sbp().ndim(); ++a) {
    if (dst.nd_sbp()[a].kind == SbpKind::partial_sum && coord[static_cast<size_t>(a)] != 0) {
      local.zero_();
      return;
    }
  }
  global::Region region = global::shard_region(dst.shape(), dst.placement(), dst.nd_sbp(), index);
  Tensor view = src.expand(dst.shape());
  for (size_t d = 0; d < region.size.size(); ++d) {
    view = view.narrow(static_cast<int64_t>(d), region.start[d], region.size[d]);
  }
  local.copy_(view);
}

Tensor full(const Shape& shape, Scalar value, const Placement& placement, const NdSbp& sbp,
            std::optional<DType> dtype) {
  global::check_layout(shape, placement, sbp, "full");
  const int index = placement.index_of(global::world_rank());
  DType resolved = dtype.value_or(value.is_bool()       ? DType::boolean
                                  : value.is_integral() ? DType::i64
                                                        : DType::f32);
  if (index < 0) return make_global(Tensor(), shape, resolved, placement, sbp);
  std::vector<int64_t> coord = placement.coordinate(index);
  bool zero = false;
  for (int a = 0; a < sbp.ndim(); ++a) {
    zero = zero || (sbp[a].kind == SbpKind::partial_sum && coord[static_cast<size_t>(a)] != 0);
  }
  Tensor local =
      full(global::local_shape(shape, placement, sbp, index), zero ? Scalar(0.0) : value, resolved);
  return make_global(local, shape, resolved, placement, sbp);
}

Tensor zeros(const Shape& shape, const Placement& placement, const NdSbp& sbp, DType dtype) {
  return full(shape, 0.0, placement, sbp, dtype);
}

Tensor ones(const Shape& shape, const Placement& placement, const NdSbp& sbp, DType dtype) {
  return full(shape, 1.0, placement, sbp, dtype);
}

namespace {

// Random values as on one process. Element i uses the generator's counter i
// whatever the layout, so each rank draws only its shard's box. A partial
// layout is built from the broadcast one (values on one rank, zeros on the
// others), which needs the whole tensor there.
template <typename Draw, typename DrawRegion>
Tensor random_global(const Shape& shape, const Placement& placement, const NdSbp& sbp, DType dtype,
                     Generator* generator, Draw draw, DrawRegion draw_region) {
  global::check_layout(shape, placement, sbp, "rand");
  if (sbp.any_partial()) {
    Tensor whole = draw(shape, dtype, generator);
    Tensor broadcast = make_global(whole, shape, dtype, placement,
                                   global::uniform(Sbp::broadcast(), placement.ndim()));
    return global::box(broadcast, placement, sbp);
  }
  const int index = placement.index_of(global::world_rank());
  // Every rank advances its generator alike, inside the placement or not.
  const global::Region region = global::shard_region(shape, placement, sbp, std::max(index, 0));
  Tensor local = draw_region(shape, region.start, region.size, dtype, generator);
  return make_global(index >= 0 ? local : Tensor(), shape, dtype, placement, sbp);
}

}  // namespace

Tensor rand(const Shape& shape, const Placement& placement, const NdSbp& sbp, DType dtype,
            Generator* generator) {
  return random_global(
      shape, placement, sbp, dtype, generator,
      [](const Shape& s, DType d, Generator* g) { return rand(s, d, g); },
      [](const Shape& s, const std::vector<int64_t>& at, const Shape& size, DType d, Generator* g) {
        return rand_region(s, at, size, d, g);
      });
}

Tensor randn(const Shape& shape, const Placement& placement, const NdSbp& sbp, DType dtype,
             Generator* generator) {
  return random_global(
      shape, placement, sbp, dtype, generator,
      [](const Shape& s, DType d, Generator* g) { return randn(s, d, g); },
      [](const Shape& s, const std::vector<int64_t>& at, const Shape& size, DType d, Generator* g) {
        return randn_region(s, at, size, d, g);
      });
}

}  // namespace tessera
