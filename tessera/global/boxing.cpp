#include "tessera/global/boxing.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <numeric>
#include <optional>
#include <set>

#include "tessera/core/grad_mode.h"
#include "tessera/core/shard_trace.h"
#include "tessera/global/collective_ops.h"
#include "tessera/global/layout.h"
#include "tessera/global/process_groups.h"
#include "tessera/ops/concat.h"
#include "tessera/ops/creation.h"
#include "tessera/ops/elementwise.h"

namespace tessera::global {

using distributed::ReduceOp;

namespace {

ReduceOp reduce_op_of(const Sbp& sbp) {
  switch (sbp.kind) {
    case SbpKind::partial_max:
      return ReduceOp::max;
    case SbpKind::partial_min:
      return ReduceOp::min;
    default:
      return ReduceOp::sum;
  }
}

Tensor combine(const Tensor& a, const Tensor& b, const Sbp& kind) {
  switch (kind.kind) {
    case SbpKind::partial_max:
      return maximum(a, b);
    case SbpKind::partial_min:
      return minimum(a, b);
    default:
      return add(a, b);
  }
}

// A copy that keeps t's memory order (a transposed t stays transposed, so a
// weight gradient keeps the layout the optimizer reads without a copy), plus
// a flat view of the same elements for elementwise collectives.
std::pair<Tensor, Tensor> layout_clone(const Tensor& t) {
  const size_t ndim = t.shape().size();
  std::vector<size_t> order(ndim);
  for (size_t d = 0; d < ndim; ++d) order[d] = d;
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return t.strides()[a] > t.strides()[b]; });
  int64_t expected = 1;
  bool dense = true;
  for (size_t i = ndim; i-- > 0;) {
    if (t.shape()[order[i]] != 1 && t.strides()[order[i]] != expected) dense = false;
    expected *= t.shape()[order[i]];
  }
  if (!dense || t.is_contiguous()) {
    Tensor copy = t.clone();
    return {copy, copy.reshape({-1})};
  }
  if (tracing_shards()) {
    // A trace records ops, not raw copies: the copy in memory order, and a
    // view of it with t's strides.
    std::vector<int64_t> perm(order.begin(), order.end()), inverse(ndim);
    for (size_t i = 0; i < ndim; ++i) inverse[order[i]] = static_cast<int64_t>(i);
    Tensor dense_copy = t.permute(perm).contiguous();
    return {dense_copy.permute(inverse), dense_copy.reshape({-1})};
  }
  Tensor flat = Tensor::empty({t.numel()}, t.dtype());
  if (t.numel() > 0) {
    std::memcpy(flat.raw_data(), t.raw_data(), static_cast<size_t>(t.numel()) * dtype_size(t.dtype()));
  }
  return {make_alias(flat, t.shape(), t.strides(), 0), flat};
}

// The dims of t from the largest stride to the smallest: t.permute(order)
// is contiguous when t is a dense tensor in any memory order.
std::vector<int64_t> memory_order(const Tensor& t) {
  std::vector<int64_t> order(static_cast<size_t>(t.dim()));
  for (size_t d = 0; d < order.size(); ++d) order[d] = static_cast<int64_t>(d);
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
    return t.strides()[static_cast<size_t>(a)] > t.strides()[static_cast<size_t>(b)];
  });
  return order;
}
std::vector<int64_t> inverse_perm(const std::vector<int64_t>& perm) {
  std::vector<int64_t> inverse(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) inverse[static_cast<size_t>(perm[i])] = static_cast<int64_t>(i);
  return inverse;
}

// The pieces split_range cuts `length` into for n ranks.
std::vector<int64_t> split_sizes(int64_t length, int64_t n) {
  std::vector<int64_t> sizes;
  for (int64_t q = 0; q < n; ++q) sizes.push_back(split_range(length, n, q).size);
  return sizes;
}

// One step on this rank's group of the step's mesh axis (`ranks`, this
// rank at position k). `level` is the extent of the tensor the axis splits;
// `t` is this rank's data. Collectives run as ops (global/collective_ops.h).
Tensor run_step(const std::vector<int>& ranks, const Tensor& t, const Shape& level,
                const BoxingStep& step) {
  const Sbp& from = step.from[step.axis];
  const Sbp& to = step.to[step.axis];
  const auto n = static_cast<int64_t>(ranks.size());
  const int64_t k = std::find(ranks.begin(), ranks.end(), world_rank()) - ranks.begin();
  switch (step.route) {
    case BoxingRoute::copy:
      return layout_clone(t).first;
    case BoxingRoute::all_reduce: {
      // In t's memory order, so a transposed gradient stays transposed.
      const std::vector<int64_t> order = memory_order(t);
      return all_reduce(t.permute(order), reduce_op_of(from), ranks).permute(inverse_perm(order));
    }
    case BoxingRoute::reduce_scatter:
    case BoxingRoute::all_reduce_then_slice:
      // The op reduce-scatters even pieces and reduces then slices uneven ones.
      return reduce_scatter(t, to.axis, reduce_op_of(from), ranks);
    case BoxingRoute::all_gather:
      return all_gather(t, from.axis, ranks, split_sizes(level[static_cast<size_t>(from.axis)], n));
    case BoxingRoute::all_to_all:
      return all_to_all(t, to.axis, from.axis, ranks,
                        split_sizes(level[static_cast<size_t>(to.axis)], n),
                        split_sizes(level[static_cast<size_t>(from.axis)], n));
    case BoxingRoute::local_slice: {
      const auto d = static_cast<size_t>(to.axis);
      Range r = split_range(level[d], n, k);
      std::vector<int64_t> start(t.shape().size(), 0);
      Shape size = t.shape();
      start[d] = r.start;
      size[d] = r.size;
      return read_region(t, start, size);
    }
    case BoxingRoute::keep_on_first:
      if (to.kind == SbpKind::partial_sum && k != 0) return zeros_like(t);
      return layout_clone(t).first;
    case BoxingRoute::into_zeros: {
      // The shard at its rows of the whole, zeros around it; made of ops
      // (no raw copy), so a graph trace records it.
      const auto d = static_cast<size_t>(from.axis);
      const Range r = split_range(level[d], n, k);
      Shape before = t.shape(), after = t.shape();
      before[d] = r.start;
      after[d] = level[d] - r.start - r.size;
      std::vector<Tensor> parts;
      if (before[d] > 0) parts.push_back(zeros(before, t.dtype()));
      parts.push_back(t);
      if (after[d] > 0) parts.push_back(zeros(after, t.dtype()));
      return parts.size() == 1 ? t.contiguous().clone() : cat(parts, static_cast<int64_t>(d));
    }
    case BoxingRoute::slice_intersections:
      break;
  }
  TESSERA_FAIL("[to_global] internal error: route ", route_name(step.route),
               " is not a one-axis step");
}

// Whether converting `axis` alone, on its group, is exact given the other
// axes' current SBPs: inner axes must not split a dim the conversion moves
// along, nor hold partial values of another kind.
bool axis_conversion_is_local(const NdSbp& current, int axis, const Sbp& to) {
  const Sbp& from = current[axis];
  for (int b = axis + 1; b < current.ndim(); ++b) {
    const Sbp& inner = current[b];
    if (inner.is_split() && ((from.is_split() && from.axis == inner.axis) ||
                             (to.is_split() && to.axis == inner.axis))) {
      return false;
    }
    if (inner.is_partial() && ((from.is_partial() && from.kind != inner.kind) ||
                               (to.is_partial() && to.kind != inner.kind))) {
      return false;
    }
  }
  return true;
}

// ---- The generic path ------------------------------------------------------

struct Transfer {
  int src = 0;  // index in the source placement
  int dst = 0;  // index in the target placement
  int tile = 0;
  Region region;  // logical coordinates
};

// Which slices travel from which source to which target, in the order
// they are sent: per target, per source tile, every partial member of it.
// Pure, so plans can be priced without running. `targets`: only those
// target indices (null: every one).
std::vector<Transfer> slice_transfers(const Shape& shape, const Placement& from_placement,
                                      const NdSbp& from_sbp, const Placement& to_placement,
                                      const NdSbp& to_sbp,
                                      const std::vector<int>* targets = nullptr) {
  // Source tiles: the sources that hold one region, keyed by their split-axis
  // coordinates. A target takes one replica of each tile it overlaps (itself
  // when it is a source) and every partial member of that replica.
  std::vector<int> split_axes, broadcast_axes, partial_axes;
  for (int a = 0; a < from_sbp.ndim(); ++a) {
    (from_sbp[a].is_split() ? split_axes : from_sbp[a].is_partial() ? partial_axes
                                                                     : broadcast_axes)
        .push_back(a);
  }
  std::map<std::vector<int64_t>, int> tile_ids;
  std::vector<std::vector<int64_t>> tile_keys;
  for (int i = 0; i < from_placement.size(); ++i) {
    std::vector<int64_t> coord = from_placement.coordinate(i), key;
    for (int a : split_axes) key.push_back(coord[static_cast<size_t>(a)]);
    if (tile_ids.emplace(key, static_cast<int>(tile_keys.size())).second) tile_keys.push_back(key);
  }
  int64_t replicas = 1;
  for (int a : broadcast_axes) replicas *= from_placement.mesh()[static_cast<size_t>(a)];

  std::vector<Transfer> plan;
  std::vector<int> every;
  if (targets == nullptr) {
    every.resize(static_cast<size_t>(to_placement.size()));
    std::iota(every.begin(), every.end(), 0);
    targets = &every;
  }
  for (int j : *targets) {
    std::vector<int64_t> to_coord = to_placement.coordinate(j);
    bool holds_zeros = false;
    for (int a = 0; a < to_sbp.ndim(); ++a) {
      holds_zeros = holds_zeros || (to_sbp[a].kind == SbpKind::partial_sum && to_coord[static_cast<size_t>(a)] != 0);
    }
    if (holds_zeros) continue;
    Region want = shard_region(shape, to_placement, to_sbp, j);
    if (want.empty()) continue;
    // Which replica: this target's own, when it is a source; else spread by index.
    const int self_src = from_placement.index_of(to_placement.ranks()[static_cast<size_t>(j)]);
    std::vector<int64_t> replica(static_cast<size_t>(from_sbp.ndim()), 0);
    if (self_src >= 0) {
      replica = from_placement.coordinate(self_src);
    } else {
      int64_t pick = j % replicas;
      for (size_t b = broadcast_axes.size(); b-- > 0;) {
        const int64_t size = from_placement.mesh()[static_cast<size_t>(broadcast_axes[b])];
        replica[static_cast<size_t>(broadcast_axes[b])] = pick % size;
        pick /= size;
      }
    }
    for (size_t t = 0; t < tile_keys.size(); ++t) {
      std::vector<int64_t> coord = replica;
      for (size_t s = 0; s < split_axes.size(); ++s) {
        coord[static_cast<size_t>(split_axes[s])] = tile_keys[t][s];
      }
      for (int a : partial_axes) coord[static_cast<size_t>(a)] = 0;
      Region have = shard_region(shape, from_placement, from_sbp, from_placement.index_at(coord));
      Region overlap = intersect(want, have);
      if (overlap.empty()) continue;
      // Every combination of partial coordinates, the last axis fastest.
      int64_t combos = 1;
      for (int a : partial_axes) combos *= from_placement.mesh()[static_cast<size_t>(a)];
      for (int64_t c = 0; c < combos; ++c) {
        int64_t rest = c;
        for (size_t p = partial_axes.size(); p-- > 0;) {
          const int64_t size = from_placement.mesh()[static_cast<size_t>(partial_axes[p])];
          coord[static_cast<size_t>(partial_axes[p])] = rest % size;
          rest /= size;
        }
        plan.push_back({from_placement.index_at(coord), j, static_cast<int>(t), overlap});
      }
    }
  }

  return plan;
}

// The mesh axes of `sbp` holding partial values.
std::vector<int> partial_axes_of(const NdSbp& sbp) {
  std::vector<int> axes;
  for (int a = 0; a < sbp.ndim(); ++a) {
    if (sbp[a].is_partial()) axes.push_back(a);
  }
  return axes;
}

Tensor generic_box(const Tensor& x, const Placement& to_placement, const NdSbp& to_sbp) {
  const Placement& from_placement = x.placement();
  const NdSbp from_sbp = x.nd_sbp();
  const Shape& shape = x.shape();
  std::set<int> members(from_placement.ranks().begin(), from_placement.ranks().end());
  members.insert(to_placement.ranks().begin(), to_placement.ranks().end());
  std::vector<int> ranks(members.begin(), members.end());
  const int me = world_rank();
  const int my_dst = to_placement.index_of(me);
  const int my_src = from_placement.index_of(me);
  if (!members.count(me)) return make_global(Tensor(), shape, x.dtype(), to_placement, to_sbp);

  const std::vector<Transfer> plan =
      slice_transfers(shape, from_placement, from_sbp, to_placement, to_sbp);
  const std::vector<int> partial_axes = partial_axes_of(from_sbp);

  // Send what this rank holds, in plan order, one buffer per peer.
  auto position = [&](int world) {
    return static_cast<size_t>(std::lower_bound(ranks.begin(), ranks.end(), world) - ranks.begin());
  };
  std::vector<std::vector<Tensor>> outgoing(ranks.size());
  if (my_src >= 0) {
    Tensor local = x.local_shard().contiguous();
    Region mine = shard_region(shape, from_placement, from_sbp, my_src);
    for (const Transfer& transfer : plan) {
      if (transfer.src != my_src) continue;
      std::vector<int64_t> start(shape.size());
      for (size_t d = 0; d < shape.size(); ++d) start[d] = transfer.region.start[d] - mine.start[d];
      outgoing[position(to_placement.ranks()[static_cast<size_t>(transfer.dst)])].push_back(
          read_region(local, start, transfer.region.size).reshape({-1}));
    }
  }
  // One all_to_all_single moves every piece: what each peer sends here is
  // known from the plan, as is what this rank sends.
  std::vector<int64_t> send_sizes(ranks.size(), 0), recv_sizes(ranks.size(), 0);
  std::vector<Tensor> flat_pieces;
  for (size_t peer = 0; peer < ranks.size(); ++peer) {
    for (const Tensor& piece : outgoing[peer]) {
      send_sizes[peer] += piece.numel();
      flat_pieces.push_back(piece);
    }
  }
  for (const Transfer& transfer : plan) {
    if (transfer.dst != my_dst) continue;
    recv_sizes[position(from_placement.ranks()[static_cast<size_t>(transfer.src)])] +=
        transfer.region.numel();
  }
  const Tensor sent = flat_pieces.empty() ? zeros({0}, x.dtype()) : cat(flat_pieces, 0);
  const Tensor arrived = all_to_all_single(sent, recv_sizes, send_sizes, ranks);
  std::vector<Tensor> received;
  int64_t at = 0;
  for (int64_t size : recv_sizes) {
    received.push_back(arrived.narrow(0, at, size));
    at += size;
  }

  if (my_dst < 0) return make_global(Tensor(), shape, x.dtype(), to_placement, to_sbp);
  Region mine = shard_region(shape, to_placement, to_sbp, my_dst);
  // Eager writes the pieces into zeros; a trace, which cannot record a raw
  // write, joins them with cat (the same values).
  const bool traced = tracing_shards();
  Tensor out = traced ? Tensor() : zeros(mine.size, x.dtype());
  std::vector<PlacedPiece> placed;
  std::vector<int64_t> offsets(ranks.size(), 0);
  // Pieces of one tile arrive together, partial members in order.
  std::vector<Tensor> pieces;
  auto flush = [&](const Region& region) {
    for (size_t p = partial_axes.size(); p-- > 0;) {
      const int64_t size = from_placement.mesh()[static_cast<size_t>(partial_axes[p])];
      const Sbp& kind = from_sbp[partial_axes[p]];
      std::vector<Tensor> reduced;
      for (size_t g = 0; g < pieces.size(); g += static_cast<size_t>(size)) {
        Tensor acc = pieces[g];
        for (int64_t m = 1; m < size; ++m) acc = combine(acc, pieces[g + static_cast<size_t>(m)], kind);
        reduced.push_back(acc);
      }
      pieces = std::move(reduced);
    }
    std::vector<int64_t> start(shape.size());
    for (size_t d = 0; d < shape.size(); ++d) start[d] = region.start[d] - mine.start[d];
    if (traced) {
      placed.push_back({start, pieces.at(0)});
    } else {
      write_region(out, start, pieces.at(0).contiguous());
    }
    pieces.clear();
  };
  for (size_t p = 0; p < plan.size(); ++p) {
    const Transfer& transfer = plan[p];
    if (transfer.dst != my_dst) continue;
    const size_t from = position(from_placement.ranks()[static_cast<size_t>(transfer.src)]);
    const int64_t count = transfer.region.numel();
    pieces.push_back(received[from].narrow(0, offsets[from], count).reshape(transfer.region.size));
    offsets[from] += count;
    const bool last_of_tile = p + 1 == plan.size() || plan[p + 1].dst != my_dst ||
                              plan[p + 1].tile != transfer.tile;
    if (last_of_tile) flush(transfer.region);
  }
  if (traced) out = assemble_pieces(std::move(placed), mine.size, x.dtype()).contiguous();
  return make_global(out, shape, x.dtype(), to_placement, to_sbp);
}

}  // namespace

const char* route_name(BoxingRoute route) {
  switch (route) {
    case BoxingRoute::copy:
      return "copy (one rank holds the whole)";
    case BoxingRoute::all_reduce:
      return "all-reduce";
    case BoxingRoute::reduce_scatter:
      return "reduce-scatter";
    case BoxingRoute::all_reduce_then_slice:
      return "all-reduce, then keep a slice";
    case BoxingRoute::all_gather:
      return "all-gather";
    case BoxingRoute::all_to_all:
      return "all-to-all";
    case BoxingRoute::local_slice:
      return "local slice";
    case BoxingRoute::keep_on_first:
      return "first rank keeps, others zeros";
    case BoxingRoute::into_zeros:
      return "own slice into zeros";
    case BoxingRoute::slice_intersections:
      return "slice intersections (all-to-all)";
  }
  return "route";
}

namespace {

double bytes_of(const Shape& shape, DType dtype) {
  return static_cast<double>(numel(shape)) * static_cast<double>(dtype_size(dtype));
}

// The route one mesh axis takes from `from` to `to` on groups of `n`
// ranks; `even` says whether the target split divides evenly on every group.
BoxingRoute axis_route(const Sbp& from, const Sbp& to, int64_t n, bool even) {
  if (n == 1) return BoxingRoute::copy;
  if (from.is_partial()) {
    if (to.is_broadcast() || to.is_partial()) return BoxingRoute::all_reduce;
    return even ? BoxingRoute::reduce_scatter : BoxingRoute::all_reduce_then_slice;
  }
  if (from.is_split()) {
    if (to.is_split()) return BoxingRoute::all_to_all;
    if (to.kind == SbpKind::partial_sum) return BoxingRoute::into_zeros;
    return BoxingRoute::all_gather;  // B, or P(max/min): every rank holds the whole
  }
  return to.is_split() ? BoxingRoute::local_slice : BoxingRoute::keep_on_first;
}

// Sizes one step moves on the rank at `index`: the payload it hands the
// collective, the bytes it sends to others, the bytes a local step writes.
struct StepBytes {
  double payload = 0;
  double link = 0;
  double local = 0;
};

StepBytes step_bytes(const BoxingStep& step, const TensorMeta& meta, const Placement& placement,
                     int index) {
  const Sbp& to = step.to[step.axis];
  const double mine = bytes_of(local_shape(meta.shape, placement, step.from, index), meta.dtype);
  const double after = bytes_of(local_shape(meta.shape, placement, step.to, index), meta.dtype);
  const double n = static_cast<double>(step.group_size);
  switch (step.route) {
    case BoxingRoute::copy:
    case BoxingRoute::local_slice:
    case BoxingRoute::keep_on_first:
    case BoxingRoute::into_zeros:
      return {0, 0, after};
    case BoxingRoute::all_reduce:
    case BoxingRoute::all_reduce_then_slice:
      return {mine, 2 * mine * (n - 1) / n, 0};
    case BoxingRoute::reduce_scatter:
      return {mine, mine * (n - 1) / n, 0};
    case BoxingRoute::all_gather:
      return {mine, after - mine, 0};
    case BoxingRoute::all_to_all: {
      // The piece a rank keeps is its own block of the new split.
      Shape kept = local_shape(meta.shape, placement, step.from, index);
      const Shape level = shard_region(meta.shape, placement, step.from, index, step.axis).size;
      const int64_t k = placement.coordinate(index)[static_cast<size_t>(step.axis)];
      kept[static_cast<size_t>(to.axis)] =
          split_range(level[static_cast<size_t>(to.axis)], step.group_size, k).size;
      return {mine, mine - bytes_of(kept, meta.dtype), 0};
    }
    case BoxingRoute::slice_intersections:
      break;
  }
  return {};
}

// How far apart in rank order the first and last ranks of one of the
// step's groups are, plus one: a mesh axis's groups stride over the axes
// after it.
int64_t group_span(const BoxingStep& step, const Placement& placement) {
  if (step.axis < 0) return placement.size();
  int64_t stride = 1;
  for (size_t a = static_cast<size_t>(step.axis) + 1; a < placement.mesh().size(); ++a) {
    stride *= placement.mesh()[a];
  }
  return stride * (step.group_size - 1) + 1;
}

void price(BoxingStep& step, const Placement& placement, const CostModel& model) {
  step.seconds = model.copy_seconds(step.local_bytes);
  if (step.collective) {
    const LinkModel fit = model.link(step.group_size, group_span(step, placement), step.collective);
    step.seconds += fit.alpha_seconds + step.link_bytes * fit.seconds_per_byte;
  }
}

std::optional<Collective> collective_of(BoxingRoute route) {
  switch (route) {
    case BoxingRoute::all_reduce:
    case BoxingRoute::all_reduce_then_slice:
      return Collective::all_reduce;
    case BoxingRoute::reduce_scatter:
      return Collective::reduce_scatter;
    case BoxingRoute::all_gather:
      return Collective::all_gather;
    case BoxingRoute::all_to_all:
    case BoxingRoute::slice_intersections:
      return Collective::all_to_all;
    default:
      return std::nullopt;
  }
}

// The bytes that cross a link in `transfers`: per source, what it sends
// to other ranks; per target, what it receives from them.
struct LinkLoad {
  std::map<int, double> payload, sent;  // per source index
  std::map<int, double> received;       // per target index
};
LinkLoad link_load(const std::vector<Transfer>& transfers, const TensorMeta& meta,
                   const Placement& placement) {
  LinkLoad load;
  for (const Transfer& transfer : transfers) {
    const double bytes =
        static_cast<double>(transfer.region.numel()) * static_cast<double>(dtype_size(meta.dtype));
    load.payload[transfer.src] += bytes;
    const int src_rank = meta.placement.ranks()[static_cast<size_t>(transfer.src)];
    if (placement.ranks()[static_cast<size_t>(transfer.dst)] != src_rank) {
      load.sent[transfer.src] += bytes;
      load.received[transfer.dst] += bytes;
    }
  }
  return load;
}

double largest(const std::map<int, double>& bytes) {
  double most = 0;
  for (const auto& [index, b] : bytes) most = std::max(most, b);
  return most;
}

// The generic route from `from` (placement and SBP) to the target, sized
// from its transfers: the busiest link's bytes, sent or received (a rank
// that gathers a broadcast shard receives far more than it sends).
BoxingStep slice_intersection_step(const TensorMeta& meta, const NdSbp& from,
                                   const Placement& placement, const NdSbp& sbp) {
  BoxingStep step;
  step.route = BoxingRoute::slice_intersections;
  step.from = from;
  step.to = sbp;
  step.collective = Collective::all_to_all;
  std::set<int> members(meta.placement.ranks().begin(), meta.placement.ranks().end());
  members.insert(placement.ranks().begin(), placement.ranks().end());
  step.group_size = static_cast<int64_t>(members.size());
  const LinkLoad load =
      link_load(slice_transfers(meta.shape, meta.placement, from, placement, sbp), meta, placement);
  step.payload_bytes = largest(load.payload);
  step.link_bytes = std::max(largest(load.sent), largest(load.received));
  // Each target assembles its shard in fresh memory.
  for (int j = 0; j < placement.size(); ++j) {
    step.local_bytes = std::max(step.local_bytes,
                                bytes_of(local_shape(meta.shape, placement, sbp, j), meta.dtype));
  }
  return step;
}

// Up to this many ranks the generic route is sized from its exact
// transfers (quadratic in the ranks); beyond, it is estimated.
constexpr int kEnumeratedRanks = 64;

// Whether a same-placement conversion goes one mesh axis at a time (no
// generic route), as plan_boxing's loop below decides.
bool axis_by_axis(const NdSbp& from, const NdSbp& to) {
  NdSbp current = from;
  for (int axis = to.ndim(); axis-- > 0;) {
    if (current[axis] == to[axis]) continue;
    if (!axis_conversion_is_local(current, axis, to[axis])) return false;
    current = with_axis(current, axis, to[axis]);
  }
  return true;
}

// The generic route on a large mesh, sized without listing every transfer
// (what the planner prices for a thousand ranks): from the exact transfers
// into a few targets (the first, middle and last), the most one receives;
// the sources send as much on average (each target takes its replica of a
// tile by its index, which spreads the sending). Every rank hands over its
// whole shard, as an all-to-all does, and assembles its new one in fresh
// memory.
BoxingStep estimated_intersection_step(const TensorMeta& meta, const Placement& placement,
                                       const NdSbp& sbp) {
  BoxingStep step;
  step.route = BoxingRoute::slice_intersections;
  step.from = meta.sbp;
  step.to = sbp;
  step.collective = Collective::all_to_all;
  step.group_size = placement.size();
  const std::vector<int> sampled = {0, placement.size() / 2, placement.size() - 1};
  const LinkLoad load =
      link_load(slice_transfers(meta.shape, meta.placement, meta.sbp, placement, sbp, &sampled),
                meta, placement);
  const double bytes_per_element = static_cast<double>(dtype_size(meta.dtype));
  step.payload_bytes =
      static_cast<double>(shard_region(meta.shape, placement, meta.sbp, 0).numel()) *
      bytes_per_element;
  step.link_bytes = largest(load.received);
  step.local_bytes =
      static_cast<double>(shard_region(meta.shape, placement, sbp, 0).numel()) * bytes_per_element;
  return step;
}

}  // namespace

BoxingPlan plan_boxing(const TensorMeta& meta, const Placement& placement, const NdSbp& sbp,
                       const CostModel& model) {
  TESSERA_CHECK(meta.is_global(), "[to_global] boxing needs a global tensor");
  check_layout(meta.shape, placement, sbp, "to_global");
  BoxingPlan plan{meta, placement, sbp, {}, 0};
  if (meta.placement == placement && meta.sbp == sbp) return plan;
  if (meta.placement != placement) {
    plan.steps.push_back(slice_intersection_step(meta, meta.sbp, placement, sbp));
  } else if (placement.size() > kEnumeratedRanks && !axis_by_axis(meta.sbp, sbp)) {
    plan.steps.push_back(estimated_intersection_step(meta, placement, sbp));
  } else {
    NdSbp current = meta.sbp;
    for (int axis = sbp.ndim(); axis-- > 0;) {
      if (current[axis] == sbp[axis]) continue;
      if (!axis_conversion_is_local(current, axis, sbp[axis])) {
        plan.steps.push_back(slice_intersection_step(meta, current, placement, sbp));
        break;
      }
      const int64_t n = placement.mesh()[static_cast<size_t>(axis)];
      const Sbp& to = sbp[axis];
      // A partial source converting to another partial kind is reduced
      // first, then treated as broadcast.
      std::vector<Sbp> hops{to};
      if (current[axis].is_partial() && to.is_partial() && n > 1) hops = {Sbp::broadcast(), to};
      for (const Sbp& hop : hops) {
        bool even = true;
        if (hop.is_split()) {
          for (int index = 0; index < placement.size(); ++index) {
            const Shape level = shard_region(meta.shape, placement, current, index, axis).size;
            even = even && level[static_cast<size_t>(hop.axis)] % n == 0;
          }
        }
        BoxingStep step;
        step.route = axis_route(current[axis], hop, n, even);
        step.axis = axis;
        step.from = current;
        step.to = with_axis(current, axis, hop);
        step.group_size = n;
        step.collective = collective_of(step.route);
        // Every rank moves the same when every split is even: one says it.
        const bool alike = splits_evenly(meta.shape, placement, step.from) &&
                           splits_evenly(meta.shape, placement, step.to);
        for (int index = 0; index < (alike ? 1 : placement.size()); ++index) {
          StepBytes bytes = step_bytes(step, meta, placement, index);
          step.payload_bytes = std::max(step.payload_bytes, bytes.payload);
          step.link_bytes = std::max(step.link_bytes, bytes.link);
          step.local_bytes = std::max(step.local_bytes, bytes.local);
        }
        plan.steps.push_back(step);
        current = step.to;
      }
    }
  }
  for (BoxingStep& step : plan.steps) {
    price(step, placement, model);
    plan.seconds += step.seconds;
  }
  return plan;
}

RankTraffic rank_traffic(const BoxingPlan& plan, int rank) {
  RankTraffic traffic;
  const TensorMeta& meta = plan.from;
  for (const BoxingStep& step : plan.steps) {
    if (!step.collective) continue;
    if (step.route == BoxingRoute::slice_intersections) {
      const bool member = meta.placement.contains(rank) || plan.to_placement.contains(rank);
      if (!member) continue;
      traffic.calls += 1;
      const int src = meta.placement.index_of(rank);
      for (const Transfer& transfer :
           slice_transfers(meta.shape, meta.placement, step.from, plan.to_placement, step.to)) {
        if (transfer.src != src) continue;
        traffic.payload_bytes += static_cast<double>(transfer.region.numel()) *
                                 static_cast<double>(dtype_size(meta.dtype));
      }
      continue;
    }
    const int index = meta.placement.index_of(rank);
    if (index < 0) continue;
    traffic.calls += 1;
    traffic.payload_bytes += step_bytes(step, meta, meta.placement, index).payload;
  }
  return traffic;
}

std::string BoxingPlan::explain() const {
  std::string text = str_cat(shape_str(from.shape), " ", dtype_name(from.dtype), ": ",
                             placement_str(from.placement), " ", nd_sbp_str(from.sbp), " -> ",
                             placement_str(to_placement), " ", nd_sbp_str(to_sbp));
  if (steps.empty()) return text + ": nothing to move";
  for (const BoxingStep& step : steps) {
    text += "\n  " + std::string(route_name(step.route));
    text += step.axis >= 0
                ? str_cat(" on mesh axis ", step.axis, " (groups of ", step.group_size, ")")
                : str_cat(" among ", step.group_size, " ranks");
    text += str_cat(": ", nd_sbp_str(step.from), " -> ", nd_sbp_str(step.to));
    if (step.collective) {
      text += str_cat(", ", step.payload_bytes, " B in, ", step.link_bytes, " B sent per rank");
    }
    if (step.local_bytes > 0) text += str_cat(", ", step.local_bytes, " B written");
    text += str_cat(", ", step.seconds * 1e6, " us");
  }
  return text;
}

Tensor run_boxing(const BoxingPlan& plan, const Tensor& x) {
  TESSERA_CHECK(x.is_global(), "[to_global] boxing needs a global tensor");
  TESSERA_CHECK(x.placement() == plan.from.placement && x.nd_sbp() == plan.from.sbp &&
                    x.shape() == plan.from.shape && x.dtype() == plan.from.dtype,
                "[to_global] internal error: a boxing plan for ", shape_str(plan.from.shape), " ",
                nd_sbp_str(plan.from.sbp), " run on ", shape_str(x.shape()), " ",
                nd_sbp_str(x.nd_sbp()));
  NoGradGuard no_grad;
  const Placement& placement = plan.to_placement;
  if (x.is_meta()) return make_global_meta(x.shape(), x.dtype(), placement, plan.to_sbp);
  if (plan.steps.empty()) {
    Tensor local = x.local_shard();
    return make_global(local.defined() ? layout_clone(local).first : local, x.shape(), x.dtype(),
                       placement, plan.to_sbp);
  }
  const int index = x.placement() == placement ? placement.index_of(world_rank()) : -1;
  Tensor local = x.local_shard();
  for (const BoxingStep& step : plan.steps) {
    if (step.route == BoxingRoute::slice_intersections) {
      Tensor current = make_global(local, x.shape(), x.dtype(), x.placement(), step.from);
      return generic_box(current, placement, plan.to_sbp);
    }
    if (index < 0) return make_global(Tensor(), x.shape(), x.dtype(), placement, plan.to_sbp);
    Shape level = shard_region(x.shape(), placement, step.from, index, step.axis).size;
    local = run_step(axis_ranks(placement, index, step.axis), local, level, step);
  }
  return make_global(local, x.shape(), x.dtype(), placement, plan.to_sbp);
}

Tensor box(const Tensor& x, const Placement& placement, const NdSbp& sbp) {
  TESSERA_CHECK(x.is_global(), "[to_global] boxing needs a global tensor");
  return run_boxing(plan_boxing(x.meta(), placement, sbp), x);
}

}  // namespace tessera::global
