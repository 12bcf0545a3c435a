#include "tessera/global/layout.h"

#include <algorithm>
#include <cstring>

#include "tessera/core/error.h"
#include "tessera/core/tensor.h"
#include "tessera/ops/concat.h"
#include "tessera/ops/creation.h"

namespace tessera::global {

Range split_range(int64_t length, int64_t parts, int64_t index) {
  int64_t base = length / parts, extra = length % parts;
  return {index * base + std::min(index, extra), base + (index < extra ? 1 : 0)};
}

int64_t Region::numel() const { return tessera::numel(size); }

Region intersect(const Region& a, const Region& b) {
  Region out{a.start, a.size};
  for (size_t d = 0; d < a.start.size(); ++d) {
    int64_t lo = std::max(a.start[d], b.start[d]);
    int64_t hi = std::min(a.start[d] + a.size[d], b.start[d] + b.size[d]);
    out.start[d] = lo;
    out.size[d] = std::max<int64_t>(hi - lo, 0);
  }
  return out;
}

Region shard_region(const Shape& shape, const Placement& placement, const NdSbp& sbp, int index,
                    int axes) {
  Region region{std::vector<int64_t>(shape.size(), 0), shape};
  std::vector<int64_t> coord = placement.coordinate(index);
  int limit = axes < 0 ? sbp.ndim() : axes;
  for (int a = 0; a < limit; ++a) {
    const Sbp& s = sbp[a];
    if (!s.is_split()) continue;
    auto d = static_cast<size_t>(s.axis);
    Range range = split_range(region.size[d], placement.mesh()[static_cast<size_t>(a)],
                              coord[static_cast<size_t>(a)]);
    region.start[d] += range.start;
    region.size[d] = range.size;
  }
  return region;
}

Shape local_shape(const Shape& shape, const Placement& placement, const NdSbp& sbp, int index) {
  return shard_region(shape, placement, sbp, index).size;
}

bool splits_evenly(const Shape& shape, const Placement& placement, const NdSbp& sbp) {
  Shape level = shape;
  for (int a = 0; a < sbp.ndim(); ++a) {
    if (!sbp[a].is_split()) continue;
    const auto d = static_cast<size_t>(sbp[a].axis);
    const int64_t parts = placement.mesh()[static_cast<size_t>(a)];
    if (level[d] % parts != 0) return false;
    level[d] /= parts;
  }
  return true;
}

void check_layout(const Shape& shape, const Placement& placement, const NdSbp& sbp,
                  const std::string& op) {
  TESSERA_CHECK(placement.defined(), "[", op, "] needs a placement");
  TESSERA_CHECK(sbp.defined(), "[", op, "] needs an sbp");
  TESSERA_CHECK(sbp.ndim() == placement.ndim(), "[", op, "] sbp ", nd_sbp_str(sbp), " has ",
                sbp.ndim(), " axes but placement ", placement_str(placement), " has a ",
                placement.ndim(), "-D mesh; give one Sbp per mesh axis");
  for (int a = 0; a < sbp.ndim(); ++a) {
    if (!sbp[a].is_split()) continue;
    TESSERA_CHECK(sbp[a].axis < static_cast<int64_t>(shape.size()), "[", op, "] sbp ",
                  nd_sbp_str(sbp), " splits dim ", sbp[a].axis, " but the tensor of shape ",
                  shape_str(shape), " has ", shape.size(), " dims; valid split axes are 0..",
                  static_cast<int64_t>(shape.size()) - 1);
  }
}

NdSbp with_axis(const NdSbp& nd, int axis, const Sbp& sbp) {
  std::vector<Sbp> sbps = nd.sbps();
  sbps.at(static_cast<size_t>(axis)) = sbp;
  return NdSbp(sbps);
}

NdSbp uniform(const Sbp& sbp, int ndim) {
  return NdSbp(std::vector<Sbp>(static_cast<size_t>(ndim), sbp));
}

Tensor read_region(const Tensor& local, const std::vector<int64_t>& start, const Shape& size) {
  Tensor view = local;
  for (size_t d = 0; d < size.size(); ++d) {
    if (size[d] != view.shape()[d]) view = view.narrow(static_cast<int64_t>(d), start[d], size[d]);
  }
  return view.clone();
}

void write_region(const Tensor& dst, const std::vector<int64_t>& start, const Tensor& source) {
  if (source.numel() == 0) return;
  const Tensor piece = source.to(dst.dtype()).contiguous();
  const Shape& shape = dst.shape();
  const Shape& size = piece.shape();
  const size_t ndim = shape.size();
  const size_t elem = dtype_size(dst.dtype());
  auto* out = static_cast<char*>(dst.raw_data());
  const auto* in = static_cast<const char*>(piece.raw_data());
  if (ndim == 0) {
    std::memcpy(out, in, elem);
    return;
  }
  Strides strides = contiguous_strides(shape);
  const size_t row = static_cast<size_t>(size[ndim - 1]) * elem;
  const int64_t rows = piece.numel() / size[ndim - 1];
  std::vector<int64_t> index(ndim, 0);  // over the outer dims of piece
  for (int64_t r = 0; r < rows; ++r) {
    int64_t offset = start[ndim - 1];
    for (size_t d = 0; d + 1 < ndim; ++d) offset += (start[d] + index[d]) * strides[d];
    std::memcpy(out + offset * static_cast<int64_t>(elem), in + static_cast<size_t>(r) * row, row);
    for (size_t d = ndim - 1; d-- > 0;) {
      if (++index[d] < size[d]) break;
      index[d] = 0;
    }
  }
}

namespace {

// The pieces (all of them inside `size`) tiled from dim `dim` on.
Tensor assemble_from(std::vector<PlacedPiece>& pieces, const Shape& size, size_t dim) {
  if (pieces.size() == 1 && pieces[0].piece.shape() == size) return pieces[0].piece;
  TESSERA_CHECK(dim < size.size(), "[assemble_pieces] internal error: ", pieces.size(),
                " pieces overlap in a region of shape ", shape_str(size));
  std::stable_sort(pieces.begin(), pieces.end(), [dim](const PlacedPiece& a, const PlacedPiece& b) {
    return a.start[dim] < b.start[dim];
  });
  TensorVector parts;
  int64_t at = 0;
  for (size_t first = 0; first < pieces.size();) {
    const int64_t start = pieces[first].start[dim];
    const int64_t extent = pieces[first].piece.shape()[dim];
    size_t last = first;
    while (last < pieces.size() && pieces[last].start[dim] == start) {
      TESSERA_CHECK(pieces[last].piece.shape()[dim] == extent, "[assemble_pieces] internal ",
                    "error: pieces starting at ", start, " on dim ", dim, " differ in extent");
      ++last;
    }
    TESSERA_CHECK(start == at, "[assemble_pieces] internal error: dim ", dim, " is covered up to ",
                  at, " but the next pieces start at ", start);
    std::vector<PlacedPiece> band(pieces.begin() + static_cast<std::ptrdiff_t>(first),
                                  pieces.begin() + static_cast<std::ptrdiff_t>(last));
    Shape band_size = size;
    band_size[dim] = extent;
    parts.push_back(assemble_from(band, band_size, dim + 1));
    at += extent;
    first = last;
  }
  TESSERA_CHECK(at == size[dim], "[assemble_pieces] internal error: dim ", dim,
                " is covered up to ", at, " of ", size[dim]);
  return parts.size() == 1 ? parts[0] : cat(parts, static_cast<int64_t>(dim));
}

}  // namespace

Tensor assemble_pieces(std::vector<PlacedPiece> pieces, const Shape& size, DType dtype) {
  if (pieces.empty()) return zeros(size, dtype);
  return assemble_from(pieces, size, 0);
}

}  // namespace tessera::global
