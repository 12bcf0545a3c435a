// The ops behind Tensor::to_global and Tensor::to_local (ops/to_global.cpp):
// the bridges between local and global tensors, and redistribution. Each is
// an op (global_only: the eager-global handler runs it, run_conversion
// below), so a tracer sees it, and all are differentiable: the gradient of a
// layout change is the same logical tensor, boxed back.

#include "tessera/global/conversions.h"

#include "tessera/core/grad_mode.h"
#include "tessera/core/shard_trace.h"
#include "tessera/global/boxing.h"
#include "tessera/global/collective_ops.h"
#include "tessera/global/layout.h"
#include "tessera/global/process_groups.h"
#include "tessera/ops/dispatch.h"
#include "tessera/ops/layout_attrs.h"

namespace tessera {

namespace {

// NdSbp with broadcast axes made partial-sum: the gradient layout of a
// tensor whose broadcast copies came from the first rank.
NdSbp broadcast_as_partial(const NdSbp& sbp) {
  std::vector<Sbp> sbps = sbp.sbps();
  for (Sbp& s : sbps) {
    if (s.is_broadcast()) s = Sbp::partial_sum();
  }
  return NdSbp(sbps);
}

OpDef conversion_def(const char* name) {
  OpDef d;
  d.name = name;
  d.global_only = true;
  d.saves_inputs = false;
  return d;
}

const OpDef& from_local_op();

// Global -> global ("to_global" on a global tensor): boxing to the layout
// in the attributes; the gradient goes back to the input's layout.
const OpDef& redistribute_op() {
  static const OpDef& def = register_op([] {
    OpDef d = conversion_def("to_global");
    d.infer = [](const MetaVector& in, const Attrs& attrs) {
      TensorMeta out = in.at(0);
      out.placement = placement_attr(attrs);
      out.sbp = sbp_attr(attrs);
      return MetaVector{out};
    };
    d.grad = [](const GradContext& c) {
      const TensorMeta& from = c.input_meta(0);
      return std::vector<Tensor>{c.grad_output(0).to_global(from.placement, from.sbp)};
    };
    d.torch_name = "torch.distributed.tensor.DTensor.redistribute";
    d.signature = "x.to_global(placement, sbp)";
    return d;
  }());
  return def;
}

// Local -> global: every rank's piece of one logical tensor. Broadcast
// copies come from the first rank ("broadcast_first"), so the gradient of
// those goes there.
const OpDef& from_local_op() {
  static const OpDef& def = register_op([] {
    OpDef d = conversion_def("local_to_global");
    // The logical shape: "shape" when given, else every rank is taken to
    // hold this rank's piece (the real run gathers the pieces' sizes).
    d.infer = [](const MetaVector& in, const Attrs& attrs) {
      TensorMeta out = in.at(0);
      out.placement = placement_attr(attrs);
      out.sbp = sbp_attr(attrs);
      if (attrs.has("shape")) {
        out.shape = attrs.ints("shape");
      } else {
        for (int a = 0; a < out.sbp.ndim(); ++a) {
          if (!out.sbp[a].is_split()) continue;
          out.shape.at(static_cast<size_t>(out.sbp[a].axis)) *=
              out.placement.mesh()[static_cast<size_t>(a)];
        }
      }
      return MetaVector{out};
    };
    d.grad = [](const GradContext& c) {
      const TensorMeta& out = c.output_meta(0);
      NdSbp sbp = c.attrs().b("broadcast_first") ? broadcast_as_partial(out.sbp) : out.sbp;
      return std::vector<Tensor>{c.grad_output(0).to_global(out.placement, sbp).to_local()};
    };
    d.torch_name = "torch.distributed.tensor.DTensor.from_local";
    d.signature = "x.to_global(placement, sbp) (x local)";
    return d;
  }());
  return def;
}

// Global -> local: this rank's shard; the local gradients are taken as the
// shards of one tensor.
const OpDef& to_local_op() {
  static const OpDef& def = register_op([] {
    OpDef d = conversion_def("to_local");
    d.infer = [](const MetaVector& in, const Attrs&) {
      const TensorMeta& x = in.at(0);
      const int index = x.placement.index_of(global::world_rank());
      TESSERA_CHECK(index >= 0, "[to_local] this rank (", global::world_rank(),
                    ") is outside the placement ", placement_str(x.placement),
                    " and holds no shard");
      return MetaVector{
          {global::local_shape(x.shape, x.placement, x.sbp, index), x.dtype, x.device}};
    };
    d.grad = [](const GradContext& c) {
      const TensorMeta& in = c.input_meta(0);
      Attrs attrs{{"broadcast_first", false}, {"shape", in.shape}};
      set_layout_attrs(attrs, in.placement, in.sbp);
      return std::vector<Tensor>{call1(from_local_op(), {c.grad_output(0)}, attrs)};
    };
    d.torch_name = "torch.distributed.tensor.DTensor.to_local";
    d.signature = "x.to_local()";
    return d;
  }());
  return def;
}

const bool conversions_registered = (redistribute_op(), from_local_op(), to_local_op(), true);

void check_placement_ranks(const Placement& placement) {
  const int world = distributed::default_group()->size();
  for (int rank : placement.ranks()) {
    TESSERA_CHECK(rank < world, "[to_global] placement ", placement_str(placement),
                  " names rank ", rank, " but this job has ", world, " processes");
  }
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

// Runs local_to_global: wraps this rank's piece, broadcasting from the
// first rank where the layout broadcasts.
Tensor from_local(const Tensor& local, const Placement& placement, const NdSbp& sbp,
                  bool broadcast_first, const Attrs& attrs) {
  global::check_layout(local.shape(), placement, sbp, "to_global");
  // A plan: the mesh need not be this job's. (Under a trace the meta shard
  // stands for this rank's real one, core/shard_trace.h.)
  if (local.is_meta() && !tracing_shards()) {
    const TensorMeta out = from_local_op().infer({local.meta()}, attrs).at(0);
    return make_global_meta(out.shape, local.dtype(), placement, sbp);
  }
  check_placement_ranks(placement);
  const Shape shape = logical_shape(local, placement, sbp);
  if (attrs.has("shape")) {
    TESSERA_CHECK(shape == attrs.ints("shape"), "[to_global] the ranks' pieces make a tensor of ",
                  "shape ", shape_str(shape), ", not the ", shape_str(attrs.ints("shape")),
                  " that was given");
  }
  const int index = placement.index_of(global::world_rank());
  Tensor shard = index >= 0 ? local.detach() : Tensor();
  if (index >= 0 && broadcast_first) {
    NoGradGuard no_grad;
    for (int axis = 0; axis < sbp.ndim(); ++axis) {
      if (!sbp[axis].is_broadcast() || placement.mesh()[static_cast<size_t>(axis)] == 1) continue;
      shard = global::broadcast(shard, 0, global::axis_ranks(placement, index, axis));
    }
  }
  return make_global(shard, shape, local.dtype(), placement, sbp);
}

}  // namespace

namespace global {

std::vector<Tensor> run_conversion(const OpDef& op, const std::vector<Tensor>& inputs,
                                   const Attrs& attrs) {
  const Tensor& x = inputs.at(0);
  if (&op == &to_local_op()) {
    TESSERA_CHECK(x.is_global(), "[to_local] needs a global tensor");
    const TensorMeta out = op.infer({x.meta()}, attrs).at(0);
    if (x.is_meta()) return {Tensor::empty(out.shape, out.dtype, Device::meta())};
    return {x.local_shard().detach()};
  }
  const Placement placement = placement_attr(attrs);
  const NdSbp sbp = sbp_attr(attrs);
  if (&op == &from_local_op()) {
    TESSERA_CHECK(!x.is_global(), "[to_global] local_to_global needs a local tensor");
    return {from_local(x, placement, sbp, attrs.b("broadcast_first"), attrs)};
  }
  TESSERA_CHECK(&op == &redistribute_op(), "[", op.name, "] is not a conversion between local ",
                "and global tensors");
  if (!x.is_meta()) check_placement_ranks(placement);
  return {box(x, placement, sbp)};
}

}  // namespace global

}  // namespace tessera
