// Indexing ops: embedding, index_select and gather read entries at given
// indices; scatter_add and index_add add entries at given indices and are
// the lookups' gradients (and vice versa). Kernels: backend/cpu/index.cpp.

#include "tessera/ops/index.h"

#include "tessera/ops/creation.h"
#include "tessera/ops/elementwise.h"
#include "tessera/ops/op.h"
#include "tessera/ops/pad.h"

namespace tessera {

namespace {

const Sbp kB = Sbp::broadcast();
const Sbp kPs = Sbp::partial_sum();

// Lookups copy values, so partial values of any kind stay partial when the
// indices are the same everywhere: (P, B) -> P.
void add_lookup_partials(std::vector<SbpSignature>& signatures) {
  for (Sbp partial : {Sbp::partial_sum(), Sbp::partial_max(), Sbp::partial_min()}) {
    signatures.push_back({{partial, kB}, {partial}});
  }
}

int64_t rank_of(const TensorMeta& meta) {
  return static_cast<int64_t>(meta.shape.size());
}

// A gradient of index's shape, zero-padded to src's: entries of src beyond
// index's extent were not used by the scatter.
Tensor to_src_shape(const Tensor& picked, const Shape& src_shape) {
  if (picked.shape() == src_shape) return picked;
  std::vector<int64_t> pads;
  for (int64_t d = picked.dim() - 1; d >= 0; --d) {
    pads.push_back(0);
    pads.push_back(src_shape[d] - picked.shape()[d]);
  }
  return pad(picked, pads);
}

// src narrowed to index's shape: the entries a scatter reads.
Tensor slice_to(const Tensor& src, const Shape& shape) {
  Tensor out = src;
  for (int64_t d = 0; d < src.dim(); ++d) {
    if (out.shape()[d] != shape[d]) out = out.narrow(d, 0, shape[d]);
  }
  return out;
}

// The scatters keep a dim split when x, index and src all have its full
// extent there (each rank scatters its own rows).
std::vector<SbpSignature> scatter_splits(const MetaVector& in, int64_t dim) {
  const Shape &x = in[0].shape, &index = in[1].shape, &src = in[2].shape;
  std::vector<SbpSignature> signatures;
  for (int64_t d = 0; d < rank_of(in[0]); ++d) {
    if (d != dim && x[d] == index[d] && index[d] == src[d]) {
      signatures.push_back({{Sbp::split(d), Sbp::split(d), Sbp::split(d)}, {Sbp::split(d)}});
    }
  }
  return signatures;
}

const OpDef& embedding_op = register_op([] {
  OpDef def;
  def.name = "embedding";
  def.kind = OpKind::indexing;
  def.torch_name = "torch.nn.functional.embedding";
  def.signature = "embedding(weight, indices, padding_idx)";
  def.infer = [](const MetaVector& in, const Attrs&) {
    Shape shape = in[1].shape;
    shape.push_back(in[0].shape[1]);
    return MetaVector{{shape, in[0].dtype, in[0].device}};
  };
  def.sbp = [](const MetaVector& in, const Attrs&) {
    std::vector<SbpSignature> signatures;
    // Indices split along any axis split the output there; a weight split
    // along D splits the output's last axis. A vocabulary-split weight
    // (S(0)) needs masking and a sum, which a local kernel cannot express.
    for (int64_t d = 0; d < rank_of(in[1]); ++d) {
      signatures.push_back({{kB, Sbp::split(d)}, {Sbp::split(d)}});
    }
    signatures.push_back({{Sbp::split(1), kB}, {Sbp::split(rank_of(in[1]))}});
    add_lookup_partials(signatures);
    return signatures;
  };
  def.grad = [](const GradContext& c) {
    const Shape& weight_shape = c.input_meta(0).shape;
    const Tensor& indices = c.input(1);
    int64_t count = indices.numel();
    Tensor rows = c.grad_output(0).reshape({count, weight_shape[1]});
    Tensor grad = index_add(zeros_for(c.input_meta(0), rows.dtype()), 0, indices.reshape({count}),
                            rows);
    int64_t padding_idx = c.attrs().i("padding_idx");
    if (padding_idx >= 0) {
      Tensor keep = ne(arange(weight_shape[0]), padding_idx).reshape({weight_shape[0], 1});
      grad = where(keep, grad, 0.0);
    }
    return std::vector<Tensor>{grad, Tensor()};
  };
  return def;
}());

const OpDef& index_select_op = register_op([] {
  OpDef def;
  def.name = "index_select";
  def.kind = OpKind::indexing;
  def.torch_name = "torch.index_select";
  def.signature = "index_select(x, dim, index)";
  def.infer = [](const MetaVector& in, const Attrs& attrs) {
    Shape shape = in[0].shape;
    shape[attrs.i("dim")] = numel(in[1].shape);
    return MetaVector{{shape, in[0].dtype, in[0].device}};
  };
  def.sbp = [](const MetaVector& in, const Attrs& attrs) {
    int64_t dim = attrs.i("dim");
    std::vector<SbpSignature> signatures;
    for (int64_t d = 0; d < rank_of(in[0]); ++d) {
      if (d != dim) signatures.push_back({{Sbp::split(d), kB}, {Sbp::split(d)}});
    }
    signatures.push_back({{kB, Sbp::split(0)}, {Sbp::split(dim)}});
    add_lookup_partials(signatures);
    return signatures;
  };
  def.grad = [](const GradContext& c) {
    const TensorMeta& x = c.input_meta(0);
    Tensor grad = index_add(zeros_for(x, c.grad_output(0).dtype()), c.attrs().i("dim"),
                            c.input(1), c.grad_output(0));
    return std::vector<Tensor>{grad, Tensor()};
  };
  return def;
}());

const OpDef& gather_op = register_op([] {
  OpDef def;
  def.name = "gather";
  def.kind = OpKind::indexing;
  def.torch_name = "torch.gather";
  def.signature = "gather(x, dim, index)";
  def.infer = [](const MetaVector& in, const Attrs&) {
    return MetaVector{{in[1].shape, in[0].dtype, in[0].device}};
  };
  def.sbp = [](const MetaVector& in, const Attrs& attrs) {
    int64_t dim = attrs.i("dim");
    std::vector<SbpSignature> signatures;
    // Along other axes, x and index rows only line up when the sizes agree.
    for (int64_t d = 0; d < rank_of(in[0]); ++d) {
      if (d != dim && in[0].shape[d] == in[1].shape[d]) {
        signatures.push_back({{Sbp::split(d), Sbp::split(d)}, {Sbp::split(d)}});
      }
    }
    signatures.push_back({{kB, Sbp::split(dim)}, {Sbp::split(dim)}});
    add_lookup_partials(signatures);
    return signatures;
  };
  def.grad = [](const GradContext& c) {
    const TensorMeta& x = c.input_meta(0);
    Tensor grad = scatter_add(zeros_for(x, c.grad_output(0).dtype()), c.attrs().i("dim"),
                              c.input(1), c.grad_output(0));
    return std::vector<Tensor>{grad, Tensor()};
  };
  return def;
}());

const OpDef& scatter_add_op = register_op([] {
  OpDef def;
  def.name = "scatter_add";
  def.kind = OpKind::indexing;
  def.torch_name = "torch.scatter_add";
  def.signature = "scatter_add(x, dim, index, src)";
  def.infer = [](const MetaVector& in, const Attrs&) { return MetaVector{in[0]}; };
  def.sbp = [](const MetaVector& in, const Attrs& attrs) {
    int64_t dim = attrs.i("dim");
    const Shape &index = in[1].shape, &src = in[2].shape;
    std::vector<SbpSignature> signatures = scatter_splits(in, dim);
    signatures.push_back({{kPs, kB, kPs}, {kPs}});
    // Each rank adds its share of the entries to its partial x.
    if (index[dim] == src[dim]) {
      signatures.push_back({{kPs, Sbp::split(dim), Sbp::split(dim)}, {kPs}});
    }
    return signatures;
  };
  def.grad = [](const GradContext& c) {
    const Tensor& g = c.grad_output(0);
    std::vector<Tensor> grads(3);
    if (c.needs_input_grad(0)) grads[0] = g;
    if (c.needs_input_grad(2)) {
      grads[2] = to_src_shape(gather(g, c.attrs().i("dim"), c.input(1)), c.input_meta(2).shape);
    }
    return grads;
  };
  return def;
}());

const OpDef& index_add_op = register_op([] {
  OpDef def;
  def.name = "index_add";
  def.kind = OpKind::indexing;
  def.torch_name = "torch.index_add";
  def.signature = "index_add(x, dim, index, source, alpha)";
  def.infer = [](const MetaVector& in, const Attrs&) { return MetaVector{in[0]}; };
  def.sbp = [](const MetaVector& in, const Attrs& attrs) {
    int64_t dim = attrs.i("dim");
    std::vector<SbpSignature> signatures;
    for (int64_t d = 0; d < rank_of(in[0]); ++d) {
      if (d != dim) signatures.push_back({{Sbp::split(d), kB, Sbp::split(d)}, {Sbp::split(d)}});
    }
    signatures.push_back({{kPs, kB, kPs}, {kPs}});
    signatures.push_back({{kPs, Sbp::split(0), Sbp::split(dim)}, {kPs}});
    return signatures;
  };
  def.grad = [](const GradContext& c) {
    const Tensor& g = c.grad_output(0);
    std::vector<Tensor> grads(3);
    if (c.needs_input_grad(0)) grads[0] = g;
    if (c.needs_input_grad(2)) {
      grads[2] = index_select(g, c.attrs().i("dim"), c.input(1));
      double alpha = c.attrs().f("alpha");
      if (alpha != 1.0) grads[2] = mul(grads[2], alpha);
    }
    return grads;
  };
  return def;
}());

const OpDef& scatter_op = register_op([] {
  OpDef def;
  def.name = "scatter";
  def.kind = OpKind::indexing;
  def.torch_name = "torch.scatter";
  def.signature = "scatter(x, dim, index, src | value)";
  def.infer = [](const MetaVector& in, const Attrs&) { return MetaVector{in[0]}; };
  def.sbp = [](const MetaVector& in, const Attrs& attrs) {
    return scatter_splits(in, attrs.i("dim"));
  };
  def.grad = [](const GradContext& c) {
    const Tensor& g = c.grad_output(0);
    const int64_t dim = c.attrs().i("dim");
    std::vector<Tensor> grads(3);
    // Overwritten entries of x get no gradient; each written one routes it to src.
    if (c.needs_input_grad(0)) grads[0] = scatter(g, dim, c.input(1), 0.0);
    if (c.needs_input_grad(2)) {
      grads[2] = to_src_shape(gather(g, dim, c.input(1)), c.input_meta(2).shape);
    }
    return grads;
  };
  return def;
}());

// The gradient of scatter_reduce, as PyTorch 1.13 defines it: prod divides
// out the entry (with zeros handled exactly), mean divides by the count,
// amax/amin share the gradient evenly among the entries equal to the result.
std::vector<Tensor> scatter_reduce_grad(const GradContext& c) {
  const Tensor& g = c.grad_output(0);
  const Tensor& x = c.input(0);
  const Tensor& index = c.input(1);
  const Tensor src = slice_to(c.input(2), index.shape());
  const int64_t dim = c.attrs().i("dim");
  const std::string& reduce = c.attrs().get<std::string>("reduce");
  const bool include_self = c.attrs().b("include_self");
  Tensor grad_x, grad_src;
  if (reduce == "sum") {
    grad_x = g;
    grad_src = gather(g, dim, index);
  } else if (reduce == "mean") {
    Tensor count = include_self ? ones_like(g) : zeros_like(g);
    count = scatter_add(count, dim, index, ones_like(src));
    count = masked_fill(count, eq(count, 0.0), 1.0);
    grad_x = div(g, count);
    grad_src = div(gather(g, dim, index), gather(count, dim, index));
  } else if (reduce == "prod") {
    Tensor result = c.output(0);
    // Products without the entry itself, computed exactly when it is zero.
    Tensor masked_x = masked_fill(x, eq(x, 0.0), 1.0);
    Tensor masked_x_result = scatter_reduce(masked_x, dim, index, src, reduce, include_self);
    grad_x = div(mul(g, masked_x_result), masked_x);
    Tensor src_zero = eq(src, 0.0);
    Tensor zeros_at = gather(scatter_add(zeros_like(x), dim, index, src_zero.to(x.dtype())), dim,
                             index);
    Tensor single_zero = logical_and(src_zero, eq(zeros_at, 1.0));
    Tensor masked_src = masked_fill(src, single_zero, 1.0);
    Tensor masked_src_result = scatter_reduce(x, dim, index, masked_src, reduce, include_self);
    grad_src = where(single_zero, gather(mul(g, masked_src_result), dim, index),
                     div(gather(mul(g, result), dim, index), masked_fill(src, src_zero, 1.0)));
  } else {  // amax, amin
    Tensor result = c.output(0);
    Tensor value = gather(result, dim, index);
    Tensor x_is_result = eq(x, result).to(x.dtype());
    Tensor src_is_result = eq(src, value).to(x.dtype());
    Tensor shares = scatter_add(x_is_result, dim, index, src_is_result);
    Tensor distributed = div(g, shares);
    grad_x = mul(x_is_result, distributed);
    grad_src = mul(src_is_result, gather(distributed, dim, index));
  }
  if (!include_self) grad_x = scatter(grad_x, dim, index, 0.0);
  return {grad_x, Tensor(), to_src_shape(grad_src, c.input_meta(2).shape)};
}

const OpDef& scatter_reduce_op = register_op([] {
  OpDef def;
  def.name = "scatter_reduce";
  def.kind = OpKind::indexing;
  def.torch_name = "torch.scatter_reduce";
  def.signature = "scatter_reduce(x, dim, index, src, reduce, include_self)";
  def.infer = [](const MetaVector& in, const Attrs&) { return MetaVector{in[0]}; };
  def.sbp = [](const MetaVector& in, const Attrs& attrs) {
    return scatter_splits(in, attrs.i("dim"));
  };
  def.saves_outputs = true;
  def.grad = scatter_reduce_grad;
  return def;
}());

void check_index(const Tensor& index, const char* op) {
  TESSERA_CHECK(index.defined(), "[", op, "] index is an undefined tensor");
  TESSERA_CHECK(index.dtype() == DType::i64 || index.dtype() == DType::i32, "[", op,
                "] index must be i64 or i32, got ", dtype_name(index.dtype()));
}

void check_has_dims(const Tensor& x, const char* op, const char* what) {
  TESSERA_CHECK(x.defined(), "[", op, "] ", what, " is an undefined tensor");
  TESSERA_CHECK(x.dim() >= 1, "[", op, "] ", what, " must have at least 1 dim, got a 0-d tensor");
}

// A 0-d index is treated as a 1-D index of one element.
Tensor as_index_vector(const Tensor& index, const char* op) {
  check_index(index, op);
  TESSERA_CHECK(index.dim() <= 1, "[", op, "] index must be 1-D, got shape ",
                shape_str(index.shape()));
  return index.dim() == 0 ? index.reshape({1}) : index;
}

// PyTorch treats a 0-d tensor as a 1-D tensor of one element in the
// index ops; the result takes the 0-d shape back.
Tensor as_vector_if_scalar(const Tensor& x) {
  return x.defined() && x.dim() == 0 ? x.reshape({1}) : x;
}

// True when a scatter's operands are 0-d or 1-D with at least one 0-d:
// PyTorch treats them as 1-D tensors of one element.
bool is_scalar_scatter(const Tensor& x, const Tensor& index, const Tensor& src) {
  return x.defined() && index.defined() && src.defined() &&
         (x.dim() == 0 || index.dim() == 0 || src.dim() == 0) && x.dim() <= 1 &&
         index.dim() <= 1 && src.dim() <= 1;
}

// Checks a scatter's operands (torch.scatter's rules) and returns dim in [0, x.dim()).
int64_t check_scatter(const char* op, const Tensor& x, int64_t dim, const Tensor& index,
                      const Tensor& src) {
  check_has_dims(x, op, "x");
  check_has_dims(src, op, "src");
  check_index(index, op);
  TESSERA_CHECK(index.dim() == x.dim() && src.dim() == x.dim(), "[", op,
                "] x, index and src must have the same number of dims, got ",
                shape_str(x.shape()), ", ", shape_str(index.shape()), " and ",
                shape_str(src.shape()));
  int64_t d = normalize_dim(dim, x.dim(), op);
  for (int64_t k = 0; k < x.dim(); ++k) {
    TESSERA_CHECK(
        index.shape()[k] <= src.shape()[k] && (k == d || index.shape()[k] <= x.shape()[k]), "[",
        op, "] index shape ", shape_str(index.shape()), " does not fit in dim ", k, " (x ",
        shape_str(x.shape()), ", src ", shape_str(src.shape()),
        "); index.size(k) must be <= src.size(k), and <= x.size(k) for k != dim (", d, ")");
  }
  return d;
}

void check_same_dtype(const char* op, const Tensor& x, const Tensor& src) {
  TESSERA_CHECK(x.dtype() == src.dtype(), "[", op, "] expects src of x's dtype ",
                dtype_name(x.dtype()), ", got ", dtype_name(src.dtype()));
}

// Casts a and b to their promoted dtype.
std::pair<Tensor, Tensor> promote_pair(const Tensor& a, const Tensor& b) {
  DType common = promote_types(a.dtype(), b.dtype());
  return {a.to(common), b.to(common)};
}

}  // namespace

Tensor embedding(const Tensor& weight, const Tensor& indices, std::optional<int64_t> padding_idx) {
  TESSERA_CHECK(weight.defined() && weight.dim() == 2,
                "[embedding] weight must be 2-D [num_embeddings, embedding_dim], got shape ",
                weight.defined() ? shape_str(weight.shape()) : std::string("undefined"));
  check_index(indices, "embedding");
  int64_t rows = weight.shape()[0];
  int64_t padding = -1;
  if (padding_idx) {
    padding = *padding_idx < 0 ? *padding_idx + rows : *padding_idx;
    TESSERA_CHECK(padding >= 0 && padding < rows, "[embedding] padding_idx ", *padding_idx,
                  " is out of range for ", rows, " embeddings; valid: ", -rows, " to ", rows - 1);
  }
  return call1(embedding_op, {weight, indices}, {{"padding_idx", padding}});
}

Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index) {
  if (x.defined() && x.dim() == 0) {
    Tensor vector = as_index_vector(index, "index_select");
    normalize_dim(dim, 1, "index_select");
    TESSERA_CHECK(vector.numel() == 1, "[index_select] a 0-d x takes exactly one index, got ",
                  vector.numel());
    return index_select(x.reshape({1}), 0, vector).reshape({});
  }
  check_has_dims(x, "index_select", "x");
  Tensor vector = as_index_vector(index, "index_select");
  int64_t d = normalize_dim(dim, x.dim(), "index_select");
  return call1(index_select_op, {x, vector}, {{"dim", d}});
}

Tensor gather(const Tensor& x, int64_t dim, const Tensor& index_in) {
  // PyTorch takes an empty index of any integer dtype (it is never read).
  const Tensor index = index_in.defined() && index_in.numel() == 0 &&
                               is_integral(index_in.dtype())
                           ? index_in.to(DType::i64)
                           : index_in;
  if (x.defined() && index.defined() && (x.dim() == 0 || index.dim() == 0) &&
      x.dim() <= 1 && index.dim() <= 1) {
    normalize_dim(dim, 1, "gather");
    return gather(as_vector_if_scalar(x), 0, as_vector_if_scalar(index)).reshape(index.shape());
  }
  check_has_dims(x, "gather", "x");
  check_index(index, "gather");
  TESSERA_CHECK(index.dim() == x.dim(), "[gather] index must have as many dims as x: x is ",
                shape_str(x.shape()), ", index is ", shape_str(index.shape()));
  int64_t d = normalize_dim(dim, x.dim(), "gather");
  for (int64_t k = 0; k < x.dim(); ++k) {
    TESSERA_CHECK(k == d || index.shape()[k] <= x.shape()[k], "[gather] index shape ",
                  shape_str(index.shape()), " is larger than x shape ", shape_str(x.shape()),
                  " in dim ", k, "; index.size(k) <= x.size(k) is required for every k != dim (", d,
                  ")");
  }
  return call1(gather_op, {x, index}, {{"dim", d}});
}

Tensor scatter_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src) {
  if (x.defined() && src.defined() && x.dtype() == DType::boolean &&
      src.dtype() == DType::boolean) {  // "or", added up as 0/1
    return scatter_add(x.to(DType::i64), dim, index, src.to(DType::i64)).to(DType::boolean);
  }
  if (is_scalar_scatter(x, index, src)) {
    normalize_dim(dim, 1, "scatter_add");
    return scatter_add(as_vector_if_scalar(x), 0, as_vector_if_scalar(index),
                       as_vector_if_scalar(src))
        .reshape(x.shape());
  }
  int64_t d = check_scatter("scatter_add", x, dim, index, src);
  auto [px, psrc] = promote_pair(x, src);
  return call1(scatter_add_op, {px, index, psrc}, {{"dim", d}});
}

Tensor scatter(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src) {
  if (is_scalar_scatter(x, index, src)) {
    normalize_dim(dim, 1, "scatter");
    return scatter(as_vector_if_scalar(x), 0, as_vector_if_scalar(index), as_vector_if_scalar(src))
        .reshape(x.shape());
  }
  int64_t d = check_scatter("scatter", x, dim, index, src);
  check_same_dtype("scatter", x, src);
  return call1(scatter_op, {x, index, src}, {{"dim", d}});
}

Tensor scatter(const Tensor& x, int64_t dim, const Tensor& index, Scalar value) {
  TESSERA_CHECK(x.defined(), "[scatter] x is an undefined tensor");
  check_index(index, "scatter");
  return scatter(x, dim, index, full(index.shape(), value, x.dtype()));
}

Tensor scatter(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src,
               const std::string& reduce) {
  TESSERA_CHECK(reduce == "add" || reduce == "multiply", "[scatter] unknown reduce '", reduce,
                "'; valid: add, multiply (or scatter_reduce for sum, prod, mean, amax, amin)");
  return scatter_reduce(x, dim, index, src, reduce == "add" ? "sum" : "prod", true);
}

Tensor scatter(const Tensor& x, int64_t dim, const Tensor& index, Scalar value,
               const std::string& reduce) {
  TESSERA_CHECK(x.defined(), "[scatter] x is an undefined tensor");
  check_index(index, "scatter");
  return scatter(x, dim, index, full(index.shape(), value, x.dtype()), reduce);
}

Tensor scatter_reduce(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src,
                      const std::string& reduce, bool include_self) {
  TESSERA_CHECK(reduce == "sum" || reduce == "prod" || reduce == "mean" || reduce == "amax" ||
                    reduce == "amin",
                "[scatter_reduce] unknown reduce '", reduce,
                "'; valid: sum, prod, mean, amax, amin");
  if (is_scalar_scatter(x, index, src)) {
    normalize_dim(dim, 1, "scatter_reduce");
    return scatter_reduce(as_vector_if_scalar(x), 0, as_vector_if_scalar(index),
                          as_vector_if_scalar(src), reduce, include_self)
        .reshape(x.shape());
  }
  int64_t d = check_scatter("scatter_reduce", x, dim, index, src);
  check_same_dtype("scatter_reduce", x, src);
  if (x.dtype() == DType::boolean && reduce != "mean") {
    // On bools sum and amax are "or", prod and amin "and": reduced as 0/1.
    return scatter_reduce(x.to(DType::i64), d, index, src.to(DType::i64), reduce, include_self)
        .to(DType::boolean);
  }
  TESSERA_CHECK(x.dtype() != DType::boolean, "[scatter_reduce] reduce='mean' is not defined ",
                "for bool tensors (as in PyTorch)");
  return call1(scatter_reduce_op, {x, index, src},
               {{"dim", d}, {"reduce", reduce}, {"include_self", include_self}});
}

Tensor index_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& source,
                 double alpha) {
  TESSERA_CHECK(x.defined(), "[index_add] x is an undefined tensor");
  TESSERA_CHECK(source.defined(), "[index_add] source is an undefined tensor");
  if (x.dtype() == DType::boolean && source.dtype() == DType::boolean) {  // as scatter_add
    return index_add(x.to(DType::i64), dim, index, source.to(DType::i64), alpha)
        .to(DType::boolean);
  }
  if (x.dim() == 0) {
    normalize_dim(dim, 1, "index_add");
    return index_add(x.reshape({1}), 0, index, source, alpha).reshape({});
  }
  Tensor vector = as_index_vector(index, "index_add");
  int64_t d = normalize_dim(dim, x.dim(), "index_add");
  Shape expected = x.shape();
  expected[d] = vector.numel();
  // A 0-d source stands for the one slice of a single index (as PyTorch).
  if (source.dim() == 0 && numel(expected) == 1) {
    return index_add(x, d, vector, source.reshape(expected), alpha);
  }
  TESSERA_CHECK(source.shape() == expected, "[index_add] source has shape ",
                shape_str(source.shape()), " but x is ", shape_str(x.shape()), " and index has ",
                vector.numel(), " entries; source must be ", shape_str(expected),
                " (x's shape with dim ", d, " set to the number of indices)");
  auto [px, psource] = promote_pair(x, source);
  return call1(index_add_op, {px, vector, psource}, {{"dim", d}, {"alpha", alpha}});
}

}  // namespace tessera
