// torch.nn.functional helpers, compositions of public ops (their gradients,
// SBP and degenerate shapes come with those ops).

#include "tessera/ops/functional.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "tessera/ops/creation.h"
#include "tessera/ops/elementwise.h"
#include "tessera/ops/reduce.h"

namespace tessera {

namespace {

// The p-norm of x along dim, for any p (as torch.linalg.vector_norm).
Tensor p_norm_along(const Tensor& x, double p, int64_t dim, bool keepdim) {
  const Dims dims{dim};
  if (std::isinf(p)) return p > 0 ? max(abs(x), dims, keepdim) : min(abs(x), dims, keepdim);
  if (p == 0.0) return sum(cast(ne(x, 0.0), x.dtype()), dims, keepdim);
  if (p == 1.0) return sum(abs(x), dims, keepdim);
  if (p == 2.0) return sqrt(sum(mul(x, x), dims, keepdim));
  return pow(sum(pow(abs(x), p), dims, keepdim), 1.0 / p);
}

void check_floating(const char* op, const Tensor& x) {
  TESSERA_CHECK(x.defined(), "[", op, "] got an undefined tensor");
  TESSERA_CHECK(is_floating(x.dtype()), "[", op, "] needs a floating input, got ",
                dtype_name(x.dtype()), " of shape ", shape_str(x.shape()));
}

// dim wrapped into [0, ndim) (a 0-d tensor takes dims 0 and -1).
int64_t wrap_dim_checked(const char* op, int64_t dim, int64_t ndim) {
  const int64_t rank = std::max<int64_t>(ndim, 1);
  TESSERA_CHECK(dim >= -rank && dim < rank, "[", op, "] dim ", dim,
                " is out of range for a tensor of ", ndim, " dims; valid dims are ", -rank, "..",
                rank - 1);
  return dim < 0 ? dim + rank : dim;
}

}  // namespace

Tensor normalize(const Tensor& x, double p, int64_t dim, double eps) {
  check_floating("normalize", x);
  const int64_t d = wrap_dim_checked("normalize", dim, x.dim());
  const Tensor norm =
      x.dim() == 0 ? p_norm_along(x.unsqueeze(0), p, 0, false) : p_norm_along(x, p, d, true);
  return div(x, clamp(norm, eps, std::nullopt));
}

Tensor cosine_similarity(const Tensor& x1, const Tensor& x2, int64_t dim, double eps) {
  check_floating("cosine_similarity", x1);
  check_floating("cosine_similarity", x2);
  const Shape shape = broadcast_shapes(x1.shape(), x2.shape(), "cosine_similarity");
  const int64_t ndim = static_cast<int64_t>(shape.size());
  TESSERA_CHECK(ndim >= 1, "[cosine_similarity] needs inputs with at least one dim, got ",
                shape_str(x1.shape()), " and ", shape_str(x2.shape()));
  const int64_t d = wrap_dim_checked("cosine_similarity", dim, ndim);
  Tensor a = x1.expand(shape), b = x2.expand(shape);
  Tensor na = clamp(p_norm_along(a, 2.0, d, true), eps, std::nullopt);
  Tensor nb = clamp(p_norm_along(b, 2.0, d, true), eps, std::nullopt);
  return sum(mul(div(a, na), div(b, nb)), {d});
}

Tensor pairwise_distance(const Tensor& x1, const Tensor& x2, double p, double eps, bool keepdim) {
  check_floating("pairwise_distance", x1);
  check_floating("pairwise_distance", x2);
  const Shape shape = broadcast_shapes(x1.shape(), x2.shape(), "pairwise_distance");
  TESSERA_CHECK(!shape.empty(), "[pairwise_distance] needs inputs with at least one dim, got ",
                shape_str(x1.shape()), " and ", shape_str(x2.shape()));
  return p_norm_along(add(sub(x1, x2), eps), p, -1, keepdim);
}

Tensor one_hot(const Tensor& x, int64_t num_classes) {
  TESSERA_CHECK(x.defined(), "[one_hot] got an undefined tensor");
  TESSERA_CHECK(x.dtype() == DType::i64, "[one_hot] is only applicable to index tensors (i64), ",
                "got ", dtype_name(x.dtype()));
  TESSERA_CHECK(num_classes >= -1, "[one_hot] num_classes must be -1 or >= 0, got ", num_classes);
  const Tensor held = x.local_shard();
  int64_t lowest = 0, highest = -1;
  const bool has_values = held.defined() && held.numel() > 0;
  if (has_values) {
    lowest = min(held).item<int64_t>();
    highest = max(held).item<int64_t>();
  }
  if (num_classes == -1) {
    TESSERA_CHECK(has_values && !x.is_global(), "[one_hot] cannot infer the number of classes ",
                  "from an empty or global tensor; pass num_classes");
    num_classes = highest + 1;
  }
  TESSERA_CHECK(lowest >= 0, "[one_hot] class values must be non-negative, got ", lowest);
  TESSERA_CHECK(highest < num_classes, "[one_hot] class value ", highest,
                " is out of range for num_classes ", num_classes, "; valid values are 0..",
                num_classes - 1);
  Shape class_shape(static_cast<size_t>(x.dim()) + 1, 1);
  class_shape.back() = num_classes;
  return cast(eq(x.unsqueeze(-1), arange(num_classes).reshape(class_shape)), DType::i64);
}

}  // namespace tessera
