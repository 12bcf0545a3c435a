// libtorch's indexing API, composed of views (select, slice, unsqueeze) and,
// for index tensors and masks, index_select over the indexed dims
// flattened together; writes through scatter and index_add.

#include "tessera/ops/indexing.h"

#include <algorithm>
#include <limits>
#include <string>
#include <vector>

#include "tessera/core/grad_mode.h"
#include "tessera/ops/creation.h"
#include "tessera/ops/index.h"
#include "tessera/ops/scalar.h"

namespace tessera {
namespace {

using indexing::EllipsisIndex;
using indexing::NoneIndex;
using indexing::Slice;
using indexing::TensorIndex;

// PyTorch reads u8 index tensors as masks (a deprecated spelling of bool).
bool is_mask(const Tensor& tensor) {
  return tensor.dtype() == DType::boolean || tensor.dtype() == DType::u8;
}

// How many dims of the indexed tensor an entry consumes.
int64_t dims_consumed(const TensorIndex& index) {
  const auto& value = index.value();
  if (std::holds_alternative<NoneIndex>(value) || std::holds_alternative<EllipsisIndex>(value)) {
    return 0;
  }
  if (const Tensor* tensor = std::get_if<Tensor>(&value)) {
    return tensor->defined() && is_mask(*tensor) ? tensor->dim() : 1;
  }
  return 1;
}

// An index tensor for one dim of the (basic-indexed) view.
struct Advanced {
  int64_t dim;
  Tensor index;  // i64 or i32, any shape
};

// The coordinates where a mask covering dims [d, d + mask.dim()) of x is
// true: one i64 index tensor per covered dim, as PyTorch's nonzero.
void add_mask(const Tensor& x, int64_t d, const Tensor& mask, std::vector<Advanced>& advanced,
              const char* op) {
  const int64_t k = mask.dim();
  TESSERA_CHECK(d + k <= x.dim(), "[", op, "] a mask of shape ", shape_str(mask.shape()),
                " at dim ", d, " does not fit a tensor of shape ", shape_str(x.shape()));
  for (int64_t i = 0; i < k; ++i) {
    TESSERA_CHECK(mask.shape()[i] == x.shape()[d + i], "[", op, "] the shape of the mask ",
                  shape_str(mask.shape()), " at index ", i, " does not match the shape of the ",
                  "indexed tensor ", shape_str(x.shape()), " at index ", d + i);
  }
  const std::vector<int64_t> flags = mask.to_vector<int64_t>();
  for (int64_t i = 0; i < k; ++i) {
    // Coordinate i of every true entry, in row-major order.
    int64_t inner = 1;
    for (int64_t j = i + 1; j < k; ++j) inner *= mask.shape()[j];
    std::vector<int64_t> ordered;
    for (size_t flat = 0; flat < flags.size(); ++flat) {
      if (flags[flat] != 0) ordered.push_back(static_cast<int64_t>(flat) / inner % mask.shape()[i]);
    }
    advanced.push_back(
        {d + i, Tensor::from_vector<int64_t>(ordered, {static_cast<int64_t>(ordered.size())})});
  }
}

// Advanced indexing of `x` by index tensors on some of its dims (PyTorch's
// rules): the index tensors broadcast to one shape B; the indexed dims are
// replaced by B, in place when they are adjacent, else at the front.
Tensor take_advanced(const Tensor& x, const std::vector<Advanced>& advanced, const char* op) {
  std::vector<Shape> shapes;
  for (const Advanced& a : advanced) shapes.push_back(a.index.shape());
  Shape common = shapes[0];
  for (size_t i = 1; i < shapes.size(); ++i) {
    common = broadcast_shapes(common, shapes[i], op);
  }
  // One linear position per result entry over the indexed dims (row-major).
  const int64_t entries = numel(common);
  std::vector<int64_t> linear(static_cast<size_t>(entries), 0);
  int64_t extent = 1;
  for (const Advanced& a : advanced) {
    const int64_t size = x.shape()[a.dim];
    const std::vector<int64_t> values =
        a.index.to(DType::i64).expand(common).contiguous().to_vector<int64_t>();
    for (size_t e = 0; e < values.size(); ++e) {
      int64_t p = values[e];
      TESSERA_CHECK(p >= -size && p < size, "[", op, "] index ", p,
                    " is out of bounds for dimension ", a.dim, " with size ", size);
      linear[e] = linear[e] * size + (p < 0 ? p + size : p);
    }
    extent *= size;
  }
  // The indexed dims first (in order), then the others; flattened together.
  std::vector<int64_t> order;
  Shape rest;
  for (const Advanced& a : advanced) order.push_back(a.dim);
  for (int64_t d = 0; d < x.dim(); ++d) {
    if (std::find(order.begin(), order.end(), d) == order.end()) {
      order.push_back(d);
      rest.push_back(x.shape()[d]);
    }
  }
  Shape flat_shape{extent};
  flat_shape.insert(flat_shape.end(), rest.begin(), rest.end());
  Tensor flat = x.permute(order).reshape(flat_shape);
  Tensor picked = index_select(flat, 0, Tensor::from_vector<int64_t>(linear, {entries}));
  Shape shape = common;
  shape.insert(shape.end(), rest.begin(), rest.end());
  picked = picked.reshape(shape);
  bool adjacent = true;
  for (size_t i = 1; i < advanced.size(); ++i) {
    adjacent = adjacent && advanced[i].dim == advanced[i - 1].dim + 1;
  }
  const int64_t first = advanced.front().dim;
  if (!adjacent || first == 0) return picked;
  // Move the broadcast block from the front to where the indexed dims were.
  const int64_t block = static_cast<int64_t>(common.size());
  std::vector<int64_t> back;
  for (int64_t d = 0; d < first; ++d) back.push_back(block + d);
  for (int64_t d = 0; d < block; ++d) back.push_back(d);
  for (int64_t d = block + first; d < picked.dim(); ++d) back.push_back(d);
  return picked.permute(back);
}

// Applies `indices` to x: basic entries (integers, slices, None, Ellipsis)
// as views, then index tensors and masks as one advanced-indexing step.
Tensor apply_indices(const Tensor& x, const std::vector<TensorIndex>& indices, const char* op) {
  TESSERA_CHECK(x.defined(), "[", op, "] the indexed tensor is undefined");
  int64_t consumed = 0;
  int64_t ellipses = 0;
  for (const TensorIndex& index : indices) {
    consumed += dims_consumed(index);
    if (std::holds_alternative<EllipsisIndex>(index.value())) ++ellipses;
  }
  TESSERA_CHECK(ellipses <= 1, "[", op, "] an index can only have a single ellipsis ('...')");
  TESSERA_CHECK(consumed <= x.dim(), "[", op, "] too many indices for a tensor of dimension ",
                x.dim(), " (shape ", shape_str(x.shape()), "): the index uses ", consumed);
  Tensor out = x;
  std::vector<Advanced> advanced;
  int64_t d = 0;  // the dim of `out` the next entry applies to
  for (const TensorIndex& index : indices) {
    const auto& value = index.value();
    if (const int64_t* position = std::get_if<int64_t>(&value)) {
      const int64_t size = out.shape()[d];
      TESSERA_CHECK(*position >= -size && *position < size, "[", op, "] index ", *position,
                    " is out of bounds for dimension ", d, " with size ", size);
      out = out.select(d, *position < 0 ? *position + size : *position);
    } else if (const Slice* slice = std::get_if<Slice>(&value)) {
      const int64_t step = slice->step.value_or(1);
      TESSERA_CHECK(step > 0, "[", op, "] slice step must be greater than zero, got ", step);
      out = out.slice(d, slice->start.value_or(0),
                      slice->stop.value_or(std::numeric_limits<int64_t>::max()), step);
      ++d;
    } else if (std::holds_alternative<NoneIndex>(value)) {
      out = out.unsqueeze(d);
      ++d;
    } else if (std::holds_alternative<EllipsisIndex>(value)) {
      d += x.dim() - consumed;
    } else {
      const Tensor& tensor = std::get<Tensor>(value);
      TESSERA_CHECK(tensor.defined(), "[", op, "] got an undefined index tensor");
      if (is_mask(tensor)) {
        if (tensor.dim() == 0) {
          // x[True] adds a dim of size 1, x[False] one of size 0.
          out = out.unsqueeze(d);
          const bool keep = tensor.to_vector<int64_t>()[0] != 0;
          advanced.push_back({d, keep ? zeros({1}, DType::i64) : zeros({0}, DType::i64)});
          ++d;
        } else {
          add_mask(out, d, tensor, advanced, op);
          d += tensor.dim();
        }
      } else {
        TESSERA_CHECK(tensor.dtype() == DType::i64 || tensor.dtype() == DType::i32, "[", op,
                      "] tensors used as indices must be i64, i32, bool or u8 (a mask), got ",
                      dtype_name(tensor.dtype()));
        advanced.push_back({d, tensor});
        ++d;
      }
    }
  }
  return advanced.empty() ? out : take_advanced(out, advanced, op);
}

bool has_tensor_index(const std::vector<TensorIndex>& indices) {
  for (const TensorIndex& index : indices) {
    if (std::holds_alternative<Tensor>(index.value())) return true;
  }
  return false;
}

}  // namespace

Tensor Tensor::index(const std::vector<indexing::TensorIndex>& indices) const {
  return apply_indices(*this, indices, "index");
}

Tensor index_put(const Tensor& x, const std::vector<indexing::TensorIndex>& indices,
                 const Tensor& values, bool accumulate) {
  TESSERA_CHECK(x.defined(), "[index_put] the destination is an undefined tensor");
  TESSERA_CHECK(values.defined(), "[index_put] the values are an undefined tensor");
  // Which of x's flat positions the index selects, in the selection's shape.
  const Tensor positions =
      apply_indices(arange(0, static_cast<double>(x.numel()), 1, DType::i64).reshape(x.shape()),
                    indices, "index_put");
  const Shape& target = positions.shape();
  bool fits = values.dim() <= positions.dim();
  for (int64_t k = 1; fits && k <= values.dim(); ++k) {
    const int64_t v = values.shape()[values.dim() - k];
    fits = v == 1 || v == target[target.size() - static_cast<size_t>(k)];
  }
  TESSERA_CHECK(fits, "[index_put] values of shape ", shape_str(values.shape()),
                " cannot be broadcast to the indexing result of shape ",
                shape_str(positions.shape()));
  const Tensor flat_positions = positions.reshape({positions.numel()});
  const Tensor flat_values =
      values.to(x.dtype()).expand(positions.shape()).reshape({positions.numel()});
  const Tensor flat = x.reshape({x.numel()});
  Tensor out = accumulate ? index_add(flat, 0, flat_positions, flat_values)
                          : scatter(flat, 0, flat_positions, flat_values);
  return out.reshape(x.shape());
}

Tensor& Tensor::index_put_(const std::vector<indexing::TensorIndex>& indices, const Tensor& value,
                           bool accumulate) {
  TESSERA_CHECK(value.defined(), "[index_put_] the value is an undefined tensor");
  if (!accumulate && !has_tensor_index(indices)) {
    // Basic indices select a view: write through it.
    apply_indices(*this, indices, "index_put_").copy_(value);
    return *this;
  }
  // The result is computed out of place from a copy when autograd records
  // (the old values of the untouched entries keep their gradient), then written back.
  const bool tracked = grad_enabled() && (requires_grad() || value.requires_grad());
  copy_(index_put(tracked ? clone() : *this, indices, value, accumulate));
  return *this;
}

Tensor& Tensor::index_put_(const std::vector<indexing::TensorIndex>& indices, Scalar value) {
  Tensor filled = value.is_integral() && !is_floating(dtype())
                      ? Tensor::from_vector<int64_t>({value.to_int64()}, {})
                      : Tensor::scalar(value.to_double(), DType::f64);
  return index_put_(indices, filled);
}

}  // namespace tessera
