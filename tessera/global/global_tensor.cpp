// Tensor::to_global and Tensor::to_local: the bridges between local and
// global tensors, and redistribution. All are differentiable: the gradient
// of a layout change is the same logical tensor, boxed back.

#include "tessera/core/grad_mode.h"
#include "tessera/global/boxing.h"
#include "tessera/global/layout.h"
#include "tessera/global/process_groups.h"
#include "tessera/ops/dispatch.h"

namespace tessera {

namespace {

Tensor from_local(const Tensor& local, const Placement& placement, const NdSbp& sbp,
                  bool broadcast_first);

// NdSbp with broadcast axes made partial-sum: the gradient layout of a
// tensor whose broadcast copies came from the first rank.
NdSbp broadcast_as_partial(const NdSbp& sbp) {
  std::vector<Sbp> sbps = sbp.sbps();
  for (Sbp& s : sbps) {
    if (s.is_broadcast()) s = Sbp::partial_sum();
  }
  return NdSbp(sbps);
}

// An op that never runs through call(), only sits on the tape: the output
// has the input's logical meta, and `grad` maps the gradient back.
OpDef tape_op(const char* name, GradFn grad) {
  OpDef d;
  d.name = name;
  d.infer = [](const std::vector<TensorMeta>& in, const Attrs&) {
    return std::vector<TensorMeta>{in.at(0)};
  };
  d.saves_inputs = false;
  d.grad = std::move(grad);
  return d;
}

// Global -> global: the gradient goes back to the input's layout.
const OpDef& redistribute_op() {
  static const OpDef def = tape_op("to_global", [](const GradContext& c) {
    const TensorMeta& from = c.input_meta(0);
    return std::vector<Tensor>{c.grad_output(0).to_global(from.placement, from.sbp)};
  });
  return def;
}

// Local -> global: this rank's part of the gradient, in the forward layout
// (broadcast copies that came from the first rank send it all there).
const OpDef& from_local_op() {
  static const OpDef def = tape_op("to_global", [](const GradContext& c) {
    const TensorMeta& out = c.output_meta(0);
    NdSbp sbp = c.attrs().b("broadcast_first") ? broadcast_as_partial(out.sbp) : out.sbp;
    return std::vector<Tensor>{c.grad_output(0).to_global(out.placement, sbp).to_local()};
  });
  return def;
}

// Global -> local: the local gradients, taken as the shards of one tensor.
const OpDef& to_local_op() {
  static const OpDef def = tape_op("to_local", [](const GradContext& c) {
    const TensorMeta& in = c.input_meta(0);
    return std::vector<Tensor>{from_local(c.grad_output(0), in.placement, in.sbp, false)};
  });
  return def;
}

void check_placement_ranks(const Placement& placement) {
  const int world = distributed::default_group()->size();
  for (int rank : placement.ranks()) {
    TESSERA_CHECK(rank < world, "[to_global] placement ", placement_str(placement),
                  " names rank ", rank, " but this job has ", world, " processes");
  }
}

void record(const OpDef& op, const Tensor& input, std::vector<Tensor>& outputs, Attrs attrs = {}) {
  if (input.requires_grad() && grad_enabled()) record_on_tape(op, {input}, attrs, outputs);
}

// The logical shape of the global tensor whose shards these ranks hold.
// Split dims need every shard's size: one all-gather of the shapes.
Shape logical_shape(const Tensor& local, const Placement& placement, const NdSbp& sbp) {
  bool any_split = false;
  for (const Sbp& s : sbp.sbps()) any_split = any_split || s.is_split();
  if (!any_split) return local.shape();
  auto world = distributed::default_group();
  const int64_t ndim = local.dim();
  // [ndim, dtype, size...] per rank.
  std::vector<int64_t> mine{ndim, static_cast<int64_t>(local.dtype())};
  for (int64_t size : local.shape()) mine.push_back(size);
  std::vector<Tensor> all = world->all_gather_uneven(
      Tensor::from_vector(mine, {static_cast<int64_t>(mine.size())}));
  std::vector<Shape> shapes(static_cast<size_t>(placement.size()));
  for (int i = 0; i < placement.size(); ++i) {
    std::vector<int64_t> row = all[static_cast<size_t>(placement.ranks()[static_cast<size_t>(i)])]
                                   .to_vector<int64_t>();
    TESSERA_CHECK(row[0] == ndim && row[1] == mine[1], "[to_global] rank ",
                  placement.ranks()[static_cast<size_t>(i)], " passed a ", row[0], "-d ",
                  dtype_name(static_cast<DType>(row[1])), " shard where this rank has a ", ndim,
                  "-d ", dtype_name(local.dtype()), " one; every rank must pass its piece of one tensor");
    shapes[static_cast<size_t>(i)] = Shape(row.begin() + 2, row.end());
  }
  // A split dim's length: the shards along the axes that split it, with
  // every other mesh coordinate at 0.
  Shape shape = local.shape();
  for (size_t d = 0; d < shape.size(); ++d) {
    bool split_here = false;
    for (const Sbp& s : sbp.sbps()) split_here = split_here || (s.is_split() && s.axis == static_cast<int64_t>(d));
    if (!split_here) continue;
    int64_t length = 0;
    for (int i = 0; i < placement.size(); ++i) {
      std::vector<int64_t> coord = placement.coordinate(i);
      bool on_line = true;
      for (int a = 0; a < sbp.ndim(); ++a) {
        const bool splits_d = sbp[a].is_split() && sbp[a].axis == static_cast<int64_t>(d);
        on_line = on_line && (splits_d || coord[static_cast<size_t>(a)] == 0);
      }
      if (on_line) length += shapes[static_cast<size_t>(i)][d];
    }
    shape[d] = length;
  }
  for (int i = 0; i < placement.size(); ++i) {
    Shape expected = global::local_shape(shape, placement, sbp, i);
    TESSERA_CHECK(shapes[static_cast<size_t>(i)] == expected, "[to_global] rank ",
                  placement.ranks()[static_cast<size_t>(i)], " holds a shard of shape ",
                  shape_str(shapes[static_cast<size_t>(i)]), " but ", nd_sbp_str(sbp), " of ",
                  shape_str(shape), " gives it ", shape_str(expected),
                  " (uneven splits put the extra elements on the first ranks)");
  }
  return shape;
}

Tensor from_local(const Tensor& local, const Placement& placement, const NdSbp& sbp,
                  bool broadcast_first) {
  check_placement_ranks(placement);
  global::check_layout(local.shape(), placement, sbp, "to_global");
  Shape shape = logical_shape(local, placement, sbp);
  const int index = placement.index_of(global::world_rank());
  Tensor shard = index >= 0 ? local.detach() : Tensor();
  if (index >= 0 && broadcast_first) {
    NoGradGuard no_grad;
    bool copied = false;
    for (int axis = 0; axis < sbp.ndim(); ++axis) {
      if (!sbp[axis].is_broadcast() || placement.mesh()[static_cast<size_t>(axis)] == 1) continue;
      if (!copied) shard = shard.clone();  // the broadcast writes; the caller's tensor stays
      copied = true;
      global::group_of(global::axis_ranks(placement, index, axis))->broadcast(shard, 0);
    }
  }
  std::vector<Tensor> outputs{make_global(shard, shape, local.dtype(), placement, sbp)};
  Attrs attrs{{"broadcast_first", broadcast_first}};
  record(from_local_op(), local, outputs, attrs);
  return outputs[0];
}

}  // namespace

Tensor Tensor::to_global(const Placement& placement, const NdSbp& sbp) const {
  if (!is_global()) return from_local(*this, placement, sbp, true);
  check_placement_ranks(placement);
  if (this->placement() == placement && nd_sbp() == sbp) return *this;
  std::vector<Tensor> outputs{global::box(*this, placement, sbp)};
  record(redistribute_op(), *this, outputs);
  return outputs[0];
}

Tensor Tensor::to_local() const {
  if (!is_global()) return *this;
  Tensor shard = local_shard();
  TESSERA_CHECK(shard.defined(), "[to_local] this rank (", global::world_rank(),
                ") is outside the placement ", placement_str(placement()), " and holds no shard");
  std::vector<Tensor> outputs{shard.detach()};
  record(to_local_op(), *this, outputs);
  return outputs[0];
}

}  // namespace tessera
