#include "tessera/global/boxing.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <optional>
#include <set>

#include "tessera/core/grad_mode.h"
#include "tessera/global/layout.h"
#include "tessera/global/process_groups.h"
#include "tessera/ops/concat.h"
#include "tessera/ops/creation.h"
#include "tessera/ops/elementwise.h"

namespace tessera::global {

using distributed::ReduceOp;

namespace {

// A collective's fixed cost, in byte equivalents: with ~1 GB/s links and
// ~50 us per collective, about 50 KB.
constexpr double kLatencyBytes = 50e3;

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
  Tensor flat = Tensor::empty({t.numel()}, t.dtype());
  if (t.numel() > 0) {
    std::memcpy(flat.raw_data(), t.raw_data(), static_cast<size_t>(t.numel()) * dtype_size(t.dtype()));
  }
  return {make_alias(flat, t.shape(), t.strides(), 0), flat};
}

// Moves dim `d` to the front (and back).
std::vector<int64_t> front_perm(int64_t d, int64_t ndim) {
  std::vector<int64_t> perm{d};
  for (int64_t i = 0; i < ndim; ++i) {
    if (i != d) perm.push_back(i);
  }
  return perm;
}
std::vector<int64_t> inverse_perm(const std::vector<int64_t>& perm) {
  std::vector<int64_t> inverse(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) inverse[static_cast<size_t>(perm[i])] = static_cast<int64_t>(i);
  return inverse;
}

// Concatenates the shards of `t` held along one group, split along `d`.
Tensor gather_along(distributed::Group& group, const Tensor& t, int64_t d) {
  std::vector<int64_t> perm = front_perm(d, t.dim());
  std::vector<Tensor> parts = group.all_gather_uneven(t.permute(perm).contiguous());
  return cat(parts, 0).permute(inverse_perm(perm)).contiguous();
}

// One mesh axis converted on its group (size n, this rank at k). `level` is
// the extent of the tensor this axis splits; `t` is this rank's data.
std::optional<Tensor> convert_axis(distributed::Group& group, const Tensor& t, const Shape& level,
                                   const Sbp& from, const Sbp& to) {
  const int64_t n = group.size(), k = group.rank();
  if (n == 1) return layout_clone(t).first;  // one rank holds the whole in any layout
  if (from.is_partial() && to.is_partial() && from.kind != to.kind) {
    auto [full, flat] = layout_clone(t);
    group.all_reduce(flat, reduce_op_of(from));
    return convert_axis(group, full, level, Sbp::broadcast(), to);
  }
  if (from.is_partial() && to.is_broadcast()) {
    auto [out, flat] = layout_clone(t);
    group.all_reduce(flat, reduce_op_of(from));
    return out;
  }
  if (from.is_partial() && to.is_split()) {
    const int64_t d = to.axis;
    if (level[static_cast<size_t>(d)] % n == 0 && d == 0) {
      std::vector<Tensor> pieces;
      for (int64_t q = 0; q < n; ++q) {
        Range r = split_range(level[static_cast<size_t>(d)], n, q);
        pieces.push_back(t.narrow(d, r.start, r.size).contiguous());
      }
      return group.reduce_scatter(pieces, reduce_op_of(from));
    }
    Tensor full = t.clone();
    group.all_reduce(full, reduce_op_of(from));
    Range r = split_range(level[static_cast<size_t>(d)], n, k);
    return full.narrow(d, r.start, r.size).contiguous();
  }
  if (from.is_split() && to.is_broadcast()) return gather_along(group, t, from.axis);
  if (from.is_split() && to.is_split()) {
    // Rank q gets my rows of its new columns. Pieces travel flat (all_to_all
    // lets only dim 0 differ) and are reshaped with the known sizes.
    const int64_t i = from.axis, j = to.axis;
    std::vector<int64_t> perm = front_perm(i, t.dim());
    std::vector<Tensor> pieces;
    for (int64_t q = 0; q < n; ++q) {
      Range r = split_range(level[static_cast<size_t>(j)], n, q);
      pieces.push_back(t.narrow(j, r.start, r.size).permute(perm).contiguous().reshape({-1}));
    }
    std::vector<Tensor> received = group.all_to_all(pieces);
    Shape piece_shape = t.shape();
    piece_shape[static_cast<size_t>(j)] = split_range(level[static_cast<size_t>(j)], n, k).size;
    Shape permuted;
    for (int64_t p : perm) permuted.push_back(piece_shape[static_cast<size_t>(p)]);
    for (int64_t q = 0; q < n; ++q) {
      permuted[0] = split_range(level[static_cast<size_t>(i)], n, q).size;
      received[static_cast<size_t>(q)] = received[static_cast<size_t>(q)].reshape(permuted);
    }
    return cat(received, 0).permute(inverse_perm(perm)).contiguous();
  }
  if (from.is_broadcast() && to.is_split()) {
    const auto d = static_cast<size_t>(to.axis);
    Range r = split_range(level[d], n, k);
    std::vector<int64_t> start(t.shape().size(), 0);
    Shape size = t.shape();
    start[d] = r.start;
    size[d] = r.size;
    return read_region(t, start, size);
  }
  if (from.is_broadcast() && to.is_partial()) {
    if (to.kind == SbpKind::partial_sum && k != 0) return zeros_like(t);
    return layout_clone(t).first;
  }
  if (from.is_split() && to.kind == SbpKind::partial_sum) {
    Shape full_shape = t.shape();
    const auto d = static_cast<size_t>(from.axis);
    full_shape[d] = level[d];
    Tensor out = zeros(full_shape, t.dtype());
    std::vector<int64_t> start(t.shape().size(), 0);
    start[d] = split_range(level[d], n, k).start;
    write_region(out, start, t.contiguous());
    return out;
  }
  if (from.is_split() && to.is_partial()) {  // max/min: every rank holds the whole
    return gather_along(group, t, from.axis);
  }
  return std::nullopt;
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
  for (int j = 0; j < to_placement.size(); ++j) {
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
  std::vector<Tensor> inputs;
  for (auto& pieces : outgoing) {
    inputs.push_back(pieces.empty() ? Tensor::empty({0}, x.dtype()) : cat(pieces, 0));
  }
  std::vector<Tensor> received = group_of(ranks)->all_to_all(inputs);

  if (my_dst < 0) return make_global(Tensor(), shape, x.dtype(), to_placement, to_sbp);
  Region mine = shard_region(shape, to_placement, to_sbp, my_dst);
  Tensor out = zeros(mine.size, x.dtype());
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
    write_region(out, start, pieces.at(0).contiguous());
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
  return make_global(out, shape, x.dtype(), to_placement, to_sbp);
}

}  // namespace

double boxing_cost(const Sbp& from, const Sbp& to, double bytes, int64_t parts) {
  if (from == to) return 0;
  if (parts == 1) return 1;  // the same data either way; prefer not to touch it
  const double n = static_cast<double>(parts);
  const double share = bytes * (n - 1) / n;
  if (from.is_broadcast()) return to.is_split() ? 1 : 2;  // a local slice; zeros
  if (from.is_split()) {
    if (to.is_split()) return share / n + kLatencyBytes;
    if (to.kind == SbpKind::partial_sum) return 2;  // write into zeros
    return share + kLatencyBytes;                 // all-gather
  }
  // Partial sources.
  if (to.is_split()) return share + kLatencyBytes;
  if (to.is_broadcast()) return 2 * share + kLatencyBytes;
  return 2 * share + kLatencyBytes + 2;  // another partial kind: all-reduce, then keep
}

Tensor box(const Tensor& x, const Placement& placement, const NdSbp& sbp) {
  TESSERA_CHECK(x.is_global(), "[to_global] boxing needs a global tensor");
  check_layout(x.shape(), placement, sbp, "to_global");
  NoGradGuard no_grad;
  if (x.placement() == placement && x.nd_sbp() == sbp) {
    Tensor local = x.local_shard();
    return make_global(local.defined() ? layout_clone(local).first : local, x.shape(), x.dtype(),
                       placement, sbp);
  }
  if (x.placement() != placement) return generic_box(x, placement, sbp);

  const int index = placement.index_of(world_rank());
  if (index < 0) return make_global(Tensor(), x.shape(), x.dtype(), placement, sbp);
  NdSbp current = x.nd_sbp();
  Tensor local = x.local_shard();
  for (int axis = sbp.ndim(); axis-- > 0;) {
    if (current[axis] == sbp[axis]) continue;
    std::optional<Tensor> converted;
    if (axis_conversion_is_local(current, axis, sbp[axis])) {
      Shape level = shard_region(x.shape(), placement, current, index, axis).size;
      auto group = group_of(axis_ranks(placement, index, axis));
      converted = convert_axis(*group, local, level, current[axis], sbp[axis]);
    }
    if (!converted) {
      return generic_box(make_global(local, x.shape(), x.dtype(), placement, current), placement,
                         sbp);
    }
    local = *converted;
    current = with_axis(current, axis, sbp[axis]);
  }
  return make_global(local, x.shape(), x.dtype(), placement, sbp);
}

}  // namespace tessera::global
