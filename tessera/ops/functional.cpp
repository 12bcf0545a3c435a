// torch.nn.functional helpers, compositions of public ops (their gradients,
// SBP and degenerate shapes come with those ops).

#include "tessera/ops/functional.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "tessera/ops/concat.h"
#include "tessera/ops/creation.h"
#include "tessera/ops/elementwise.h"
#include "tessera/ops/index.h"
#include "tessera/ops/reduce.h"

namespace tessera {

namespace {

// The p-norm of x along dim, for any p (as torch.linalg.vector_norm).
Tensor p_norm_along(const Tensor& x, double p, int64_t dim, bool keepdim) {
  const Dims dims{dim};
  const bool empty =
      x.dim() > 0 && x.shape()[static_cast<size_t>(dim < 0 ? dim + x.dim() : dim)] == 0;
  if (std::isinf(p) && empty) return sum(abs(x), dims, keepdim);
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
  if (ndim == 0) {
    // 0-d inputs are 1-element vectors along dim 0 (or -1), as in PyTorch.
    wrap_dim_checked("cosine_similarity", dim, 1);
    return cosine_similarity(x1.reshape({1}), x2.reshape({1}), 0, eps).reshape({});
  }
  const int64_t d = wrap_dim_checked("cosine_similarity", dim, ndim);
  Tensor a = x1.expand(shape), b = x2.expand(shape);
  // The 2-norms are clamped at eps, and their gradient is x / clamped norm
  // (as torch, which clamps the saved norm in place without grad).
  const auto clamped = [eps, d](const Tensor& v) {
    const Tensor norm = clamp(p_norm_along(v, 2.0, d, true), eps, std::nullopt).detach();
    const Tensor slope = div(v, norm).detach();
    const Tensor linear = sum(mul(v, slope), {d}, true);
    return add(norm, sub(linear, linear.detach()));
  };
  Tensor na = clamped(a);
  Tensor nb = clamped(b);
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

Tensor embedding_bag(const Tensor& input, const Tensor& weight, const Tensor& offsets,
                     const std::string& mode, const Tensor& per_sample_weights,
                     bool include_last_offset, std::optional<int64_t> padding_idx) {
  TESSERA_CHECK(input.defined() && weight.defined(), "[embedding_bag] got an undefined tensor");
  TESSERA_CHECK(mode == "sum" || mode == "mean" || mode == "max", "[embedding_bag] mode '", mode,
                "' is not valid; use \"sum\", \"mean\" or \"max\"");
  TESSERA_CHECK(weight.dim() == 2 && is_floating(weight.dtype()),
                "[embedding_bag] weight must be a floating [V, D] matrix, got ",
                shape_str(weight.shape()), " (", dtype_name(weight.dtype()), ")");
  TESSERA_CHECK(is_integral(input.dtype()), "[embedding_bag] input must hold indices, got ",
                dtype_name(input.dtype()));
  const int64_t rows = weight.shape()[0], width = weight.shape()[1];
  std::vector<int64_t> starts;
  Tensor flat = input.to(DType::i64);
  if (input.dim() == 2) {
    TESSERA_CHECK(!offsets.defined(), "[embedding_bag] offsets must be undefined for a 2-D ",
                  "input ", shape_str(input.shape()), " (each row is a bag)");
    for (int64_t b = 0; b < input.shape()[0]; ++b) starts.push_back(b * input.shape()[1]);
    flat = flat.reshape({input.numel()});
  } else {
    TESSERA_CHECK(input.dim() == 1, "[embedding_bag] input must be 1-D (with offsets) or 2-D, ",
                  "got ", shape_str(input.shape()));
    TESSERA_CHECK(offsets.defined() && offsets.dim() == 1 && is_integral(offsets.dtype()),
                  "[embedding_bag] a 1-D input needs 1-D integer offsets");
    if (offsets.numel() > 0) starts = offsets.to(DType::i64).to_vector<int64_t>();
  }
  const int64_t total = flat.numel();
  TESSERA_CHECK(starts.empty() || starts.front() == 0, "[embedding_bag] offsets[0] must be 0, ",
                "got ", starts.empty() ? 0 : starts.front());
  if (per_sample_weights.defined()) {
    TESSERA_CHECK(mode == "sum", "[embedding_bag] per_sample_weights is only supported for ",
                  "mode 'sum', got mode '", mode, "'");
    TESSERA_CHECK(per_sample_weights.shape() == input.shape(), "[embedding_bag] ",
                  "per_sample_weights has shape ", shape_str(per_sample_weights.shape()),
                  " but input has shape ", shape_str(input.shape()));
  }
  std::optional<int64_t> padding;
  if (padding_idx.has_value()) {
    TESSERA_CHECK(*padding_idx >= -rows && *padding_idx < rows, "[embedding_bag] padding_idx ",
                  *padding_idx, " is out of range for ", rows, " rows");
    padding = *padding_idx < 0 ? *padding_idx + rows : *padding_idx;
  }
  const std::vector<int64_t> ids = total > 0 ? flat.to_vector<int64_t>() : std::vector<int64_t>{};
  for (int64_t id : ids) {
    TESSERA_CHECK(id >= 0 && id < rows, "[embedding_bag] index ", id, " is out of range for ", rows,
                  " rows; valid indices are 0..", rows - 1);
  }
  // Bag b spans [starts[b], starts[b + 1]) (the last bag ends at the input's
  // end, or at the last offset with include_last_offset).
  const auto bags = static_cast<int64_t>(starts.size()) - (include_last_offset ? 1 : 0);
  TESSERA_CHECK(bags >= 0, "[embedding_bag] include_last_offset needs at least one offset");
  std::vector<int64_t> positions, bag_of, count(static_cast<size_t>(bags), 0);
  std::vector<std::vector<int64_t>> members(static_cast<size_t>(bags));
  for (int64_t b = 0; b < bags; ++b) {
    const int64_t begin = starts[static_cast<size_t>(b)];
    const int64_t end = std::min(total, b + 1 < static_cast<int64_t>(starts.size())
                                            ? starts[static_cast<size_t>(b + 1)]
                                            : total);
    TESSERA_CHECK(begin <= end || b + 1 == bags, "[embedding_bag] offsets must be ",
                  "non-decreasing, got ", begin, " before ", end);
    for (int64_t i = begin; i < end; ++i) {
      if (padding.has_value() && ids[static_cast<size_t>(i)] == *padding) continue;
      positions.push_back(i);
      bag_of.push_back(b);
      members[static_cast<size_t>(b)].push_back(static_cast<int64_t>(positions.size()) - 1);
      ++count[static_cast<size_t>(b)];
    }
  }
  const auto kept = static_cast<int64_t>(positions.size());
  const Tensor kept_ids = index_select(flat, 0, Tensor::from_vector(positions, {kept}));
  Tensor picked = embedding(weight, kept_ids);
  if (mode == "max") {
    int64_t longest = 0;
    for (const auto& m : members)
      longest = std::max<int64_t>(longest, static_cast<int64_t>(m.size()));
    // Bags padded to the longest with a row of -inf, then reduced.
    std::vector<int64_t> slots(static_cast<size_t>(bags * longest), kept);
    for (int64_t b = 0; b < bags; ++b) {
      const auto& m = members[static_cast<size_t>(b)];
      std::copy(m.begin(), m.end(), slots.begin() + b * longest);
    }
    if (longest == 0) return zeros({bags, width}, weight.dtype());
    const Tensor padded =
        cat({picked, full({1, width}, -std::numeric_limits<double>::infinity(), weight.dtype())});
    const Tensor grid = index_select(padded, 0, Tensor::from_vector(slots, {bags * longest}));
    const Tensor best = amax(grid.reshape({bags, longest, width}), {1});
    const Tensor empty = eq(Tensor::from_vector(count, {bags, 1}), 0);
    return where(empty, zeros_like(best), best);
  }
  if (per_sample_weights.defined()) {
    const Tensor sample = index_select(per_sample_weights.reshape({total}), 0,
                                       Tensor::from_vector(positions, {kept}));
    picked = mul(picked, sample.unsqueeze(1));
  }
  Tensor result = index_add(zeros({bags, width}, picked.dtype()), 0,
                            Tensor::from_vector(bag_of, {kept}), picked);
  if (mode == "mean") {
    std::vector<double> scale(static_cast<size_t>(bags));
    for (int64_t b = 0; b < bags; ++b) {
      scale[static_cast<size_t>(b)] =
          1.0 / static_cast<double>(std::max<int64_t>(count[static_cast<size_t>(b)], 1));
    }
    result = mul(result, cast(Tensor::from_vector(scale, {bags, 1}), result.dtype()));
  }
  return result;
}

}  // namespace tessera
