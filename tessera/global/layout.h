#pragma once

// Where the pieces of a global tensor sit (DESIGN §4). Splits are uneven
// when they must be: length N over k parts gives the first N mod k parts one
// extra element. On an n-D mesh the axes split in order: axis 0 splits the
// logical tensor, axis 1 splits each of those pieces, and so on.

#include <cstdint>
#include <string>
#include <vector>

#include "tessera/core/placement.h"
#include "tessera/core/shape.h"
#include "tessera/core/tensor.h"

namespace tessera::global {

// Part `index` of `length` split into `parts`.
struct Range {
  int64_t start = 0;
  int64_t size = 0;
};
Range split_range(int64_t length, int64_t parts, int64_t index);

// A box of the logical tensor: start and size per dim.
struct Region {
  std::vector<int64_t> start;
  Shape size;
  int64_t numel() const;
  bool empty() const { return numel() == 0; }
};
// The overlap of two boxes (empty sizes when they do not overlap).
Region intersect(const Region& a, const Region& b);

// The box the rank at `index` of the placement holds (partial and broadcast
// axes hold the whole extent), considering only mesh axes below `axes`.
Region shard_region(const Shape& shape, const Placement& placement, const NdSbp& sbp, int index,
                    int axes = -1);
// Shape of that rank's shard.
Shape local_shape(const Shape& shape, const Placement& placement, const NdSbp& sbp, int index);
// Whether every split divides its dim evenly, so every rank's shard has
// the same shape (what holds for one rank then holds for all).
bool splits_evenly(const Shape& shape, const Placement& placement, const NdSbp& sbp);

// Throws, naming `op`, unless `sbp` fits `placement` and every split axis is
// a dim of `shape`.
void check_layout(const Shape& shape, const Placement& placement, const NdSbp& sbp,
                  const std::string& op);

// The box at `start` of size `size` of `local` (in its own coordinates), as
// a new contiguous tensor.
Tensor read_region(const Tensor& local, const std::vector<int64_t>& start, const Shape& size);
// Copies `piece` into the contiguous tensor `dst` at `start`.
void write_region(const Tensor& dst, const std::vector<int64_t>& start, const Tensor& piece);

// A piece of a tensor and where it starts in it.
struct PlacedPiece {
  std::vector<int64_t> start;
  Tensor piece;
};
// The tensor of shape `size` that `pieces` tile, made of `cat` ops (no raw
// copy, so a graph trace records it). The pieces must form a grid: along
// every dim, pieces that start together have the same extent there, as the
// intersections of two shardings do. Pieces are the same dtype.
Tensor assemble_pieces(std::vector<PlacedPiece> pieces, const Shape& size, DType dtype);

// NdSbp with axis `axis` replaced by `sbp`.
NdSbp with_axis(const NdSbp& nd, int axis, const Sbp& sbp);
// Same as `sbp` on every one of `ndim` axes.
NdSbp uniform(const Sbp& sbp, int ndim);

}  // namespace tessera::global
