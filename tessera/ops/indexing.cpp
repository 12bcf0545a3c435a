// libtorch's indexing API, composed of views (select, slice, unsqueeze) and,
// for an index tensor or a bool mask, index_select.

#include "tessera/ops/indexing.h"

#include <limits>
#include <string>

#include "tessera/ops/index.h"
#include "tessera/ops/scalar.h"

namespace tessera {
namespace {

using indexing::EllipsisIndex;
using indexing::NoneIndex;
using indexing::Slice;
using indexing::TensorIndex;

// How many dims of the indexed tensor an entry consumes.
int64_t dims_consumed(const TensorIndex& index) {
  const auto& value = index.value();
  if (std::holds_alternative<NoneIndex>(value) || std::holds_alternative<EllipsisIndex>(value)) {
    return 0;
  }
  if (const Tensor* tensor = std::get_if<Tensor>(&value)) {
    return tensor->dtype() == DType::boolean ? std::max<int64_t>(tensor->dim(), 1) : 1;
  }
  return 1;
}

// x indexed along dim d by the integer tensor `positions` (any shape): the
// dim is replaced by positions' shape, as PyTorch's advanced indexing with a
// single index tensor.
Tensor take(const Tensor& x, int64_t d, const Tensor& positions) {
  TESSERA_CHECK(d < x.dim(), "[index] an index tensor for dim ", d, " of a ", x.dim(),
                "-d tensor");
  const int64_t size = x.shape()[d];
  std::vector<int64_t> values = positions.to_vector<int64_t>();
  for (int64_t& p : values) {
    TESSERA_CHECK(p >= -size && p < size, "[index] index ", p, " is out of bounds for dimension ",
                  d, " with size ", size);
    if (p < 0) p += size;
  }
  Tensor flat = Tensor::from_vector<int64_t>(values, {static_cast<int64_t>(values.size())});
  Tensor picked = index_select(x, d, flat);
  Shape shape(x.shape().begin(), x.shape().begin() + d);
  shape.insert(shape.end(), positions.shape().begin(), positions.shape().end());
  shape.insert(shape.end(), x.shape().begin() + d + 1, x.shape().end());
  return picked.reshape(shape);
}

// The positions where a bool mask covering dims [d, d + mask.dim()) of x is
// true, with those dims flattened into one: PyTorch's nonzero semantics.
Tensor masked(const Tensor& x, int64_t d, const Tensor& mask) {
  const int64_t k = mask.dim();
  TESSERA_CHECK(k >= 1, "[index] a 0-d bool mask is not supported yet; use a 1-element mask");
  TESSERA_CHECK(d + k <= x.dim(), "[index] a bool mask of shape ", shape_str(mask.shape()),
                " at dim ", d, " does not fit a tensor of shape ", shape_str(x.shape()));
  for (int64_t i = 0; i < k; ++i) {
    TESSERA_CHECK(mask.shape()[i] == x.shape()[d + i], "[index] the shape of the mask ",
                  shape_str(mask.shape()), " at index ", i, " does not match the shape of the ",
                  "indexed tensor ", shape_str(x.shape()), " at index ", d + i);
  }
  Shape flat_shape(x.shape().begin(), x.shape().begin() + d);
  flat_shape.push_back(mask.numel());
  flat_shape.insert(flat_shape.end(), x.shape().begin() + d + k, x.shape().end());
  std::vector<int64_t> positions;
  const std::vector<int64_t> flags = mask.to_vector<int64_t>();
  for (size_t i = 0; i < flags.size(); ++i) {
    if (flags[i] != 0) positions.push_back(static_cast<int64_t>(i));
  }
  Tensor index = Tensor::from_vector<int64_t>(positions, {static_cast<int64_t>(positions.size())});
  return index_select(x.reshape(flat_shape), d, index);
}

// Applies `indices` to x; `allow_tensors` false for index_put_, which writes
// through the resulting view.
Tensor apply_indices(const Tensor& x, const std::vector<TensorIndex>& indices, bool allow_tensors,
                     const char* op) {
  int64_t consumed = 0;
  int64_t ellipses = 0;
  int64_t tensors = 0;
  for (const TensorIndex& index : indices) {
    consumed += dims_consumed(index);
    if (std::holds_alternative<EllipsisIndex>(index.value())) ++ellipses;
    if (std::holds_alternative<Tensor>(index.value())) ++tensors;
  }
  TESSERA_CHECK(ellipses <= 1, "[", op, "] an index can only have a single ellipsis ('...')");
  TESSERA_CHECK(consumed <= x.dim(), "[", op, "] too many indices for a tensor of dimension ",
                x.dim(), " (shape ", shape_str(x.shape()), "): the index uses ", consumed);
  TESSERA_CHECK(tensors <= 1, "[", op, "] only one index tensor or bool mask per index is ",
                "supported yet, got ", tensors);
  TESSERA_CHECK(allow_tensors || tensors == 0, "[", op, "] index tensors and bool masks are ",
                "not supported by index_put_ yet; use integers, Slice, None and Ellipsis");
  Tensor out = x;
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
      if (tensor.dtype() == DType::boolean) {
        out = masked(out, d, tensor);
        ++d;
      } else {
        TESSERA_CHECK(is_integral(tensor.dtype()), "[", op, "] tensors used as indices must be ",
                      "integer (i64, i32, u8) or bool, got ", dtype_name(tensor.dtype()));
        out = take(out, d, tensor);
        d += tensor.dim();
      }
    }
  }
  return out;
}

}  // namespace

Tensor Tensor::index(const std::vector<indexing::TensorIndex>& indices) const {
  return apply_indices(*this, indices, true, "index");
}

Tensor& Tensor::index_put_(const std::vector<indexing::TensorIndex>& indices,
                           const Tensor& value) {
  TESSERA_CHECK(value.defined(), "[index_put_] the value is an undefined tensor");
  apply_indices(*this, indices, false, "index_put_").copy_(value);
  return *this;
}

Tensor& Tensor::index_put_(const std::vector<indexing::TensorIndex>& indices, Scalar value) {
  Tensor filled = value.is_integral() && !is_floating(dtype())
                      ? Tensor::from_vector<int64_t>({value.to_int64()}, {})
                      : Tensor::scalar(value.to_double(), DType::f64);
  return index_put_(indices, filled);
}

}  // namespace tessera
