// Shape and selection ops composed of views and the indexing ops (see
// shape_ops.h); coordinates that depend on values (nonzero, masked_select)
// are computed on the host, as PyTorch's CPU kernels do.

#include "tessera/ops/shape_ops.h"

#include <algorithm>
#include <numeric>
#include <string>

#include "tessera/core/grad_mode.h"
#include "tessera/ops/concat.h"
#include "tessera/ops/creation.h"
#include "tessera/ops/elementwise.h"
#include "tessera/ops/index.h"

namespace tessera {

namespace {

void check_defined(const Tensor& x, const char* op) {
  TESSERA_CHECK(x.defined(), "[", op, "] got an undefined tensor");
}

// Dims normalised against x (0-d tensors accept 0 and -1), duplicates refused.
std::vector<int64_t> distinct_dims(const std::vector<int64_t>& dims, int64_t ndim, const char* op) {
  std::vector<int64_t> result;
  for (int64_t d : dims) {
    const int64_t n = normalize_dim(d, std::max<int64_t>(ndim, 1), op);
    TESSERA_CHECK(std::find(result.begin(), result.end(), n) == result.end(), "[", op,
                  "] dim ", d, " appears more than once in the dims given");
    result.push_back(n);
  }
  return result;
}

std::string list_str(const std::vector<int64_t>& values) {
  return shape_str(values);
}

Tensor index_tensor(std::vector<int64_t> values) {
  const int64_t n = static_cast<int64_t>(values.size());
  return Tensor::from_vector<int64_t>(values, {n});
}

}  // namespace

Tensor flip(const Tensor& x, const std::vector<int64_t>& dims) {
  check_defined(x, "flip");
  Tensor result = x;
  for (int64_t d : distinct_dims(dims, x.dim(), "flip")) {
    if (x.dim() == 0) break;
    const int64_t n = x.size(d);
    result = index_select(result, d, arange(n - 1, -1, -1, DType::i64));
  }
  // PyTorch's flip always returns a new tensor.
  return result.is_same(x) ? x.clone() : result;
}

Tensor roll(const Tensor& x, const std::vector<int64_t>& shifts, const std::vector<int64_t>& dims) {
  check_defined(x, "roll");
  if (dims.empty()) {
    TESSERA_CHECK(shifts.size() == 1, "[roll] without dims takes one shift, got ",
                  list_str(shifts));
    return roll(x.flatten(), shifts, {0}).reshape(x.shape());
  }
  TESSERA_CHECK(shifts.size() == dims.size(), "[roll] shifts ", list_str(shifts), " and dims ",
                list_str(dims), " must have the same length");
  Tensor result = x;
  for (size_t i = 0; i < dims.size(); ++i) {
    if (x.dim() == 0) {
      normalize_dim(dims[i], 1, "roll");
      continue;
    }
    const int64_t d = normalize_dim(dims[i], x.dim(), "roll");
    const int64_t n = x.size(d);
    if (n == 0) continue;
    const int64_t s = ((shifts[i] % n) + n) % n;
    if (s == 0) continue;
    result = cat({result.narrow(d, n - s, s), result.narrow(d, 0, n - s)}, d);
  }
  return result.is_same(x) ? x.clone() : result;
}

Tensor repeat(const Tensor& x, const std::vector<int64_t>& repeats) {
  check_defined(x, "repeat");
  const int64_t n = static_cast<int64_t>(repeats.size());
  TESSERA_CHECK(n >= x.dim(), "[repeat] needs at least as many repeats as x has dims (",
                x.dim(), "), got ", list_str(repeats), "; tile() accepts fewer");
  for (int64_t r : repeats) {
    TESSERA_CHECK(r >= 0, "[repeat] repeats must be >= 0, got ", list_str(repeats));
  }
  Shape padded(static_cast<size_t>(n - x.dim()), 1);
  padded.insert(padded.end(), x.shape().begin(), x.shape().end());
  // [r0, s0, r1, s1, ...] by expanding [1, s0, 1, s1, ...], then merged.
  Shape spread, expanded, result_shape;
  for (int64_t i = 0; i < n; ++i) {
    spread.push_back(1);
    spread.push_back(padded[i]);
    expanded.push_back(repeats[i]);
    expanded.push_back(padded[i]);
    result_shape.push_back(repeats[i] * padded[i]);
  }
  return x.reshape(spread).expand(expanded).reshape(result_shape);
}

Tensor tile(const Tensor& x, const std::vector<int64_t>& reps) {
  check_defined(x, "tile");
  std::vector<int64_t> full(reps);
  if (static_cast<int64_t>(full.size()) < x.dim()) {
    full.insert(full.begin(), static_cast<size_t>(x.dim()) - full.size(), 1);
  }
  return repeat(x, full);
}

Tensor repeat_interleave(const Tensor& x, int64_t repeats, std::optional<int64_t> dim) {
  check_defined(x, "repeat_interleave");
  TESSERA_CHECK(repeats >= 0, "[repeat_interleave] repeats must be >= 0, got ", repeats);
  if (!dim) return repeat_interleave(x.flatten(), repeats, 0);
  if (x.dim() == 0) {
    normalize_dim(*dim, 1, "repeat_interleave");
    return repeat_interleave(x.reshape({1}), repeats, 0);
  }
  const int64_t d = normalize_dim(*dim, x.dim(), "repeat_interleave");
  Shape expanded = x.shape();
  expanded.insert(expanded.begin() + d + 1, repeats);
  Shape result = x.shape();
  result[d] *= repeats;
  return x.unsqueeze(d + 1).expand(expanded).reshape(result);
}

Tensor repeat_interleave(const Tensor& x, const Tensor& repeats, std::optional<int64_t> dim) {
  check_defined(x, "repeat_interleave");
  check_defined(repeats, "repeat_interleave");
  TESSERA_CHECK(is_integral(repeats.dtype()) && repeats.dim() <= 1, "[repeat_interleave] ",
                "repeats must be an integer tensor of 0 or 1 dims, got ",
                dtype_name(repeats.dtype()), shape_str(repeats.shape()));
  if (repeats.dim() == 0) return repeat_interleave(x, repeats.item<int64_t>(), dim);
  if (!dim) return repeat_interleave(x.flatten(), repeats, 0);
  Tensor input = x.dim() == 0 ? x.reshape({1}) : x;
  const int64_t d = normalize_dim(*dim, input.dim(), "repeat_interleave");
  const std::vector<int64_t> counts = repeats.to(DType::i64).contiguous().to_vector<int64_t>();
  TESSERA_CHECK(static_cast<int64_t>(counts.size()) == input.size(d) || counts.size() == 1,
                "[repeat_interleave] repeats has ", counts.size(), " entries but dim ", *dim,
                " has size ", input.size(d), "; give one per entry or a single count");
  if (counts.size() == 1) return repeat_interleave(input, counts[0], d);
  std::vector<int64_t> index;
  for (size_t i = 0; i < counts.size(); ++i) {
    TESSERA_CHECK(counts[i] >= 0, "[repeat_interleave] repeats must be >= 0, got ", counts[i],
                  " at position ", i);
    index.insert(index.end(), static_cast<size_t>(counts[i]), static_cast<int64_t>(i));
  }
  return index_select(input, d, index_tensor(std::move(index)));
}

Tensor repeat_interleave(const Tensor& repeats) {
  check_defined(repeats, "repeat_interleave");
  TESSERA_CHECK(is_integral(repeats.dtype()) && repeats.dim() == 1, "[repeat_interleave] ",
                "repeats must be a 1-D integer tensor, got ", dtype_name(repeats.dtype()),
                shape_str(repeats.shape()));
  return repeat_interleave(arange(0, repeats.size(0), 1, DType::i64), repeats, 0);
}

Tensor movedim(const Tensor& x, const std::vector<int64_t>& source,
               const std::vector<int64_t>& destination) {
  check_defined(x, "movedim");
  TESSERA_CHECK(source.size() == destination.size(), "[movedim] source ", list_str(source),
                " and destination ", list_str(destination), " must have the same length");
  const int64_t ndim = x.dim();
  const std::vector<int64_t> src = distinct_dims(source, ndim, "movedim");
  const std::vector<int64_t> dst = distinct_dims(destination, ndim, "movedim");
  if (ndim == 0) return x.reshape({});
  std::vector<int64_t> order(static_cast<size_t>(ndim), -1);
  std::vector<bool> used(static_cast<size_t>(ndim), false);
  for (size_t i = 0; i < src.size(); ++i) {
    order[static_cast<size_t>(dst[i])] = src[i];
    used[static_cast<size_t>(src[i])] = true;
  }
  int64_t next = 0;
  for (auto& slot : order) {
    if (slot != -1) continue;
    while (used[static_cast<size_t>(next)]) ++next;
    slot = next++;
  }
  return x.permute(order);
}

Tensor movedim(const Tensor& x, int64_t source, int64_t destination) {
  return movedim(x, std::vector<int64_t>{source}, std::vector<int64_t>{destination});
}

Tensor moveaxis(const Tensor& x, const std::vector<int64_t>& source,
                const std::vector<int64_t>& destination) {
  return movedim(x, source, destination);
}

Tensor moveaxis(const Tensor& x, int64_t source, int64_t destination) {
  return movedim(x, source, destination);
}

Tensor t(const Tensor& x) {
  check_defined(x, "t");
  TESSERA_CHECK(x.dim() <= 2, "[t] expects a tensor with <= 2 dims, got shape ",
                shape_str(x.shape()), "; use transpose(d0, d1) or mT for batches");
  return x.dim() < 2 ? x.reshape(x.shape()) : x.transpose(0, 1);
}

Tensor swapaxes(const Tensor& x, int64_t axis0, int64_t axis1) {
  check_defined(x, "swapaxes");
  return x.transpose(axis0, axis1);
}

Tensor swapdims(const Tensor& x, int64_t dim0, int64_t dim1) {
  return swapaxes(x, dim0, dim1);
}

std::vector<Tensor> unbind(const Tensor& x, int64_t dim) {
  check_defined(x, "unbind");
  TESSERA_CHECK(x.dim() > 0, "[unbind] needs a tensor with at least one dim, got a 0-d tensor");
  const int64_t d = normalize_dim(dim, x.dim(), "unbind");
  std::vector<Tensor> slices;
  for (int64_t i = 0; i < x.size(d); ++i) slices.push_back(x.select(d, i));
  return slices;
}

Tensor take_along_dim(const Tensor& x, const Tensor& indices, std::optional<int64_t> dim) {
  check_defined(x, "take_along_dim");
  check_defined(indices, "take_along_dim");
  TESSERA_CHECK(indices.dtype() == DType::i64, "[take_along_dim] indices must be i64, got ",
                dtype_name(indices.dtype()));
  if (!dim) return gather(x.flatten(), 0, indices.flatten());
  TESSERA_CHECK(x.dim() == indices.dim(), "[take_along_dim] x ", shape_str(x.shape()),
                " and indices ", shape_str(indices.shape()), " must have the same number of dims");
  if (x.dim() == 0) {
    normalize_dim(*dim, 1, "take_along_dim");
    return gather(x, 0, indices);
  }
  const int64_t d = normalize_dim(*dim, x.dim(), "take_along_dim");
  // Broadcast every dim but d.
  Shape x_shape = x.shape(), i_shape = indices.shape();
  x_shape[d] = 1;
  i_shape[d] = 1;
  Shape common = broadcast_shapes(x_shape, i_shape, "take_along_dim");
  Shape x_target = common, i_target = common;
  x_target[d] = x.size(d);
  i_target[d] = indices.size(d);
  return gather(x.expand(x_target), d, indices.expand(i_target));
}

Tensor nonzero(const Tensor& x) {
  check_defined(x, "nonzero");
  NoGradGuard no_grad;
  const std::vector<double> values = cast(x, DType::f64).contiguous().to_vector<double>();
  const Shape& shape = x.shape();
  const int64_t ndim = x.dim();
  std::vector<int64_t> coords;
  for (size_t flat = 0; flat < values.size(); ++flat) {
    if (values[flat] == 0.0) continue;
    int64_t rest = static_cast<int64_t>(flat);
    const size_t at = coords.size();
    coords.resize(at + static_cast<size_t>(ndim));
    for (int64_t d = ndim - 1; d >= 0; --d) {
      coords[at + static_cast<size_t>(d)] = rest % shape[d];
      rest /= shape[d];
    }
  }
  const int64_t count = ndim == 0 ? static_cast<int64_t>(values[0] != 0.0)
                                  : static_cast<int64_t>(coords.size()) / ndim;
  return Tensor::from_vector<int64_t>(coords, {count, ndim});
}

std::vector<Tensor> nonzero_tuple(const Tensor& x) {
  Tensor coords = nonzero(x);
  // 0-d: one coordinate tensor of 0 or 1 zeros, as PyTorch gives.
  if (x.dim() == 0) return {zeros({coords.size(0)}, DType::i64)};
  std::vector<Tensor> result;
  for (int64_t d = 0; d < x.dim(); ++d) result.push_back(coords.select(1, d).contiguous());
  return result;
}

Tensor masked_select(const Tensor& x, const Tensor& mask) {
  check_defined(x, "masked_select");
  check_defined(mask, "masked_select");
  TESSERA_CHECK(mask.dtype() == DType::boolean, "[masked_select] mask must be bool, got ",
                dtype_name(mask.dtype()));
  const Shape shape = broadcast_shapes(x.shape(), mask.shape(), "masked_select");
  Tensor flat_mask = mask.expand(shape).reshape({-1});
  Tensor positions = nonzero(flat_mask).reshape({-1});
  return index_select(x.expand(shape).reshape({-1}), 0, positions);
}

namespace {

// Bool [n] along dim, true at the (possibly negative) indices.
Tensor fill_mask(const Tensor& x, int64_t d, const Tensor& index) {
  TESSERA_CHECK(index.dtype() == DType::i64 && index.dim() <= 1, "[index_fill] index must be ",
                "an i64 tensor of 0 or 1 dims, got ", dtype_name(index.dtype()),
                shape_str(index.shape()));
  const int64_t n = x.dim() == 0 ? 1 : x.size(d);
  std::vector<uint8_t> mask(static_cast<size_t>(n), 0);
  for (int64_t i : index.contiguous().to_vector<int64_t>()) {
    TESSERA_CHECK(i >= -n && i < n, "[index_fill] index ", i, " is out of range for dim ", d,
                  " of size ", n);
    mask[static_cast<size_t>(i < 0 ? i + n : i)] = 1;
  }
  Shape shape(static_cast<size_t>(x.dim()), 1);
  if (x.dim() > 0) shape[d] = n;
  Tensor result = Tensor::from_vector<uint8_t>(mask, {n}).to(DType::boolean);
  return result.reshape(shape);
}

int64_t fill_dim(const Tensor& x, int64_t dim) {
  return normalize_dim(dim, std::max<int64_t>(x.dim(), 1), "index_fill");
}

}  // namespace

Tensor index_fill(const Tensor& x, int64_t dim, const Tensor& index, Scalar value) {
  check_defined(x, "index_fill");
  check_defined(index, "index_fill");
  return masked_fill(x, fill_mask(x, fill_dim(x, dim), index), value);
}

Tensor index_fill(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& value) {
  check_defined(x, "index_fill");
  check_defined(value, "index_fill");
  TESSERA_CHECK(value.dim() == 0, "[index_fill] value must be a 0-d tensor, got shape ",
                shape_str(value.shape()));
  return where(fill_mask(x, fill_dim(x, dim), index), value.to(x.dtype()), x);
}

}  // namespace tessera
