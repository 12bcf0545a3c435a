// Reduction ops. sum, max/min and argmax/argmin are primitives; mean, var,
// std and logsumexp are compositions of public ops. Kernels:
// backend/cpu/reduce.cpp.

#include "tessera/ops/reduce.h"

#include <algorithm>
#include <limits>

#include "tessera/core/grad_mode.h"
#include "tessera/ops/creation.h"
#include "tessera/ops/elementwise.h"
#include "tessera/ops/index.h"
#include "tessera/ops/op.h"
#include "tessera/ops/scan.h"

namespace tessera {

namespace {

Shape reduced_shape(const Shape& shape, const std::vector<int64_t>& dims, bool keepdim) {
  Shape out;
  for (int64_t d = 0; d < static_cast<int64_t>(shape.size()); ++d) {
    bool reduced = std::find(dims.begin(), dims.end(), d) != dims.end();
    if (!reduced) {
      out.push_back(shape[d]);
    } else if (keepdim) {
      out.push_back(1);
    }
  }
  return out;
}

// Reduction attrs always carry normalised, sorted dims.
MetaVector infer_reduce(const MetaVector& in, const Attrs& attrs, DType dtype) {
  return {{reduced_shape(in[0].shape, attrs.ints("dims"), attrs.b("keepdim")), dtype, in[0].device}};
}

// Kept dims stay split (renumbered when reduced dims vanish); reduced dims
// split become partial results of kind `partial`.
std::vector<SbpSignature> reduce_signatures(const TensorMeta& in, const Attrs& attrs,
                                            std::optional<Sbp> partial) {
  const auto& dims = attrs.ints("dims");
  bool keepdim = attrs.b("keepdim");
  std::vector<SbpSignature> signatures;
  int64_t out_axis = 0;
  for (int64_t d = 0; d < static_cast<int64_t>(in.shape.size()); ++d) {
    bool reduced = std::find(dims.begin(), dims.end(), d) != dims.end();
    if (!reduced) {
      signatures.push_back({{Sbp::split(d)}, {Sbp::split(out_axis)}});
    } else if (partial) {
      signatures.push_back({{Sbp::split(d)}, {*partial}});
    }
    if (!reduced || keepdim) ++out_axis;
  }
  if (partial) signatures.push_back({{*partial}, {*partial}});
  return signatures;
}

// Expands a reduced tensor back to the input's shape.
Tensor expand_back(const Tensor& reduced, const TensorMeta& input, const Attrs& attrs) {
  Tensor kept = reduced;
  if (!attrs.b("keepdim")) {
    Shape shape = reduced_shape(input.shape, attrs.ints("dims"), true);
    kept = reduced.reshape(shape);
  }
  return kept.expand(input.shape);
}

const OpDef& sum_op = register_op([] {
  OpDef def;
  def.name = "sum";
  def.kind = OpKind::reduction;
  def.torch_name = "torch.sum";
  def.signature = "sum(x, dims, keepdim)";
  def.infer = [](const MetaVector& in, const Attrs& attrs) {
    return infer_reduce(in, attrs, is_floating(in[0].dtype) ? in[0].dtype : DType::i64);
  };
  def.sbp = [](const MetaVector& in, const Attrs& attrs) {
    return reduce_signatures(in[0], attrs, Sbp::partial_sum());
  };
  def.saves_inputs = false;
  def.grad = [](const GradContext& c) {
    return std::vector<Tensor>{expand_back(c.grad_output(0), c.input_meta(0), c.attrs())};
  };
  return def;
}());

std::vector<Tensor> extremum_grad(const GradContext& c) {
  const Tensor& x = c.input(0);
  Tensor selected = cast(eq(x, expand_back(c.output(0), c.input_meta(0), c.attrs())), x.dtype());
  Tensor count = expand_back(sum(selected, c.attrs().ints("dims"), c.attrs().b("keepdim")),
                             c.input_meta(0), c.attrs());
  Tensor g = expand_back(c.grad_output(0), c.input_meta(0), c.attrs());
  return {div(mul(g, selected), count)};
}

// The op reference's entries (docs/ops.md) for the ops built by the helpers below.
constexpr OpDoc kReduceDocs[] = {
    {"max", "torch.amax, torch.max (full reduction)", "max(x, dims, keepdim)"},
    {"min", "torch.amin, torch.min (full reduction)", "min(x, dims, keepdim)"},
    {"argmax", "torch.argmax", "argmax(x, dim, keepdim)"},
    {"argmin", "torch.argmin", "argmin(x, dim, keepdim)"},
};

OpDef extremum_def(const char* name, Sbp partial) {
  OpDef def;
  def.name = name;
  def.kind = OpKind::reduction;
  document(def, kReduceDocs);
  def.infer = [](const MetaVector& in, const Attrs& attrs) {
    return infer_reduce(in, attrs, in[0].dtype);
  };
  def.sbp = [partial](const MetaVector& in, const Attrs& attrs) {
    return reduce_signatures(in[0], attrs, partial);
  };
  def.saves_outputs = true;
  def.grad = extremum_grad;
  return def;
}

const OpDef& max_op = register_op(extremum_def("max", Sbp::partial_max()));
const OpDef& min_op = register_op(extremum_def("min", Sbp::partial_min()));

OpDef arg_def(const char* name) {
  OpDef def;
  def.name = name;
  def.kind = OpKind::reduction;
  document(def, kReduceDocs);
  def.differentiable = false;
  def.infer = [](const MetaVector& in, const Attrs& attrs) {
    return infer_reduce(in, attrs, DType::i64);
  };
  def.sbp = [](const MetaVector& in, const Attrs& attrs) {
    return reduce_signatures(in[0], attrs, std::nullopt);
  };
  return def;
}

const OpDef& argmax_op = register_op(arg_def("argmax"));
const OpDef& argmin_op = register_op(arg_def("argmin"));

Attrs reduce_attrs(const Tensor& x, const Dims& dims, bool keepdim, const char* op) {
  return {{"dims", normalize_dims(dims, x.dim(), op)}, {"keepdim", keepdim}};
}

Tensor extremum(const OpDef& op, const Tensor& x, const Dims& dims, bool keepdim) {
  if (x.defined() && x.dtype() == DType::boolean) {  // or / and, as PyTorch's max / min
    return extremum(op, x.to(DType::u8), dims, keepdim).to(DType::boolean);
  }
  Attrs attrs = reduce_attrs(x, dims, keepdim, op.name.c_str());
  for (int64_t d : attrs.ints("dims")) {
    TESSERA_CHECK(x.shape()[d] > 0, "[", op.name, "] cannot reduce over dim ", d,
                  " of size 0 (shape ", shape_str(x.shape()), "): the result is undefined");
  }
  return call1(op, {x}, attrs);
}

Tensor arg_extremum(const OpDef& op, const Tensor& x, std::optional<int64_t> dim, bool keepdim) {
  if (x.defined() && x.dtype() == DType::boolean) {
    return arg_extremum(op, x.to(DType::u8), dim, keepdim);
  }
  if (!dim) {
    TESSERA_CHECK(x.numel() > 0, "[", op.name, "] of an empty tensor is undefined");
    Tensor flat_index = call1(op, {x.reshape({x.numel()})}, {{"dims", Dims{0}}, {"keepdim", false}});
    return keepdim ? flat_index.reshape(Shape(x.dim(), 1)) : flat_index;
  }
  int64_t d = normalize_dim(*dim, x.dim(), op.name.c_str());
  TESSERA_CHECK(x.dim() == 0 || x.shape()[d] > 0, "[", op.name, "] cannot reduce over dim ", d,
                " of size 0 (shape ", shape_str(x.shape()), ")");
  // A 0-d tensor has no axis d: its value is its own extremum, at index 0.
  return call1(op, {x}, {{"dims", x.dim() == 0 ? Dims{} : Dims{d}}, {"keepdim", keepdim}});
}

int64_t reduced_count(const Tensor& x, const Dims& normalized) {
  int64_t count = 1;
  for (int64_t d : normalized) count *= x.shape()[d];
  return count;
}

}  // namespace

Tensor sum(const Tensor& x, const Dims& dims, bool keepdim) {
  return call1(sum_op, {x}, reduce_attrs(x, dims, keepdim, "sum"));
}

Tensor mean(const Tensor& x, const Dims& dims, bool keepdim) {
  TESSERA_CHECK(is_floating(x.dtype()), "[mean] needs a floating tensor, got ",
                dtype_name(x.dtype()), "; cast first (x.to(DType::f32))");
  Dims normalized = normalize_dims(dims, x.dim(), "mean");
  return div(sum(x, normalized, keepdim), static_cast<double>(reduced_count(x, normalized)));
}

Tensor sum(const Tensor& x, const Dims& dims, bool keepdim, std::optional<DType> dtype) {
  TESSERA_CHECK(x.defined(), "[sum] got an undefined tensor");
  return sum(dtype ? x.to(*dtype) : x, dims, keepdim);
}

Tensor mean(const Tensor& x, const Dims& dims, bool keepdim, std::optional<DType> dtype) {
  TESSERA_CHECK(x.defined(), "[mean] got an undefined tensor");
  return mean(dtype ? x.to(*dtype) : x, dims, keepdim);
}

Tensor max(const Tensor& x, const Dims& dims, bool keepdim) { return extremum(max_op, x, dims, keepdim); }
Tensor min(const Tensor& x, const Dims& dims, bool keepdim) { return extremum(min_op, x, dims, keepdim); }

Tensor argmax(const Tensor& x, std::optional<int64_t> dim, bool keepdim) {
  return arg_extremum(argmax_op, x, dim, keepdim);
}
Tensor argmin(const Tensor& x, std::optional<int64_t> dim, bool keepdim) {
  return arg_extremum(argmin_op, x, dim, keepdim);
}

Tensor var(const Tensor& x, const Dims& dims, int64_t correction, bool keepdim) {
  TESSERA_CHECK(is_floating(x.dtype()), "[var] needs a floating tensor, got ", dtype_name(x.dtype()));
  Dims normalized = normalize_dims(dims, x.dim(), "var");
  int64_t count = reduced_count(x, normalized);
  Tensor centered = sub(x, mean(x, normalized, true));
  double divisor = static_cast<double>(std::max<int64_t>(count - correction, 0));
  return div(sum(mul(centered, centered), normalized, keepdim), divisor);
}

Tensor std(const Tensor& x, const Dims& dims, int64_t correction, bool keepdim) {
  return sqrt(var(x, dims, correction, keepdim));
}

Tensor logsumexp(const Tensor& x, const Dims& dims, bool keepdim) {
  TESSERA_CHECK(is_floating(x.dtype()), "[logsumexp] needs a floating tensor, got ",
                dtype_name(x.dtype()));
  Dims normalized = normalize_dims(dims, x.dim(), "logsumexp");
  int64_t reduced = 1;
  for (int64_t d : normalized) reduced *= x.shape()[static_cast<size_t>(d)];
  if (reduced == 0 && x.dim() > 0) {
    // The log of an empty sum: -inf, as in PyTorch (the sum keeps the graph).
    return add(sum(x, normalized, keepdim), -std::numeric_limits<double>::infinity());
  }
  Tensor shift = max(x.detach(), normalized, true);
  // An infinite maximum would give nan from inf - inf (an all -inf slice, or
  // a +inf entry); shift by 0 there, as PyTorch does: the sum is then inf or 0.
  shift = where(eq(abs(shift), std::numeric_limits<double>::infinity()), zeros_like(shift), shift);
  Tensor total = log(sum(exp(sub(x, shift)), normalized, true));
  Tensor result = add(total, shift);
  if (!keepdim) result = result.reshape(reduced_shape(x.shape(), normalized, false));
  return result;
}

Tensor sum_to(const Tensor& x, const Shape& shape) {
  if (x.shape() == shape) return x;
  const int64_t lead = x.dim() - static_cast<int64_t>(shape.size());
  TESSERA_CHECK(lead >= 0, "[sum_to] cannot reduce shape ", shape_str(x.shape()), " to ",
                shape_str(shape));
  Dims dims;
  for (int64_t d = 0; d < x.dim(); ++d) {
    if (d < lead) {
      dims.push_back(d);
    } else if (shape[d - lead] == 1 && x.shape()[d] != 1) {
      dims.push_back(d);
    } else {
      TESSERA_CHECK(shape[d - lead] == x.shape()[d], "[sum_to] cannot reduce shape ",
                    shape_str(x.shape()), " to ", shape_str(shape));
    }
  }
  Tensor reduced = dims.empty() ? x : sum(x, dims, true);
  return reduced.reshape(shape);
}

Tensor amax(const Tensor& x, const Dims& dims, bool keepdim) { return max(x, dims, keepdim); }
Tensor amin(const Tensor& x, const Dims& dims, bool keepdim) { return min(x, dims, keepdim); }

namespace {

std::tuple<Tensor, Tensor> extremum_along(const Tensor& x, int64_t dim, bool keepdim, bool is_max) {
  const char* op = is_max ? "max" : "min";
  TESSERA_CHECK(x.defined(), "[", op, "] got an undefined tensor");
  const int64_t d = normalize_dim(dim, std::max<int64_t>(x.dim(), 1), op);
  TESSERA_CHECK(x.dim() == 0 || x.size(d) > 0, "[", op, "] cannot reduce dim ", dim,
                " of size 0 (shape ", shape_str(x.shape()), "): it has no extremum");
  if (x.dim() == 0) return {x.reshape({}), zeros({}, DType::i64)};
  Tensor indices = is_max ? argmax(x, d, true) : argmin(x, d, true);
  // Gathering at the index sends the gradient to that one position.
  Tensor values = gather(x, d, indices);
  if (!keepdim) return {values.squeeze(d), indices.squeeze(d)};
  return {values, indices};
}

Tensor as_accumulated(const Tensor& x, std::optional<DType> dtype) {
  if (dtype) return x.dtype() == *dtype ? x : cast(x, *dtype);
  return is_floating(x.dtype()) ? x : cast(x, DType::i64);
}

// Whether each entry is nonzero (NaN included), as bool.
Tensor nonzero_mask(const Tensor& x, const char* op) {
  TESSERA_CHECK(x.defined(), "[", op, "] got an undefined tensor");
  return x.dtype() == DType::boolean ? x : ne(x, 0);
}

Tensor logical_result(const Tensor& x, const Tensor& result) {
  return x.dtype() == DType::u8 ? cast(result, DType::u8) : result;
}

}  // namespace

std::tuple<Tensor, Tensor> max(const Tensor& x, int64_t dim, bool keepdim) {
  return extremum_along(x, dim, keepdim, true);
}

std::tuple<Tensor, Tensor> min(const Tensor& x, int64_t dim, bool keepdim) {
  return extremum_along(x, dim, keepdim, false);
}

Tensor prod(const Tensor& x, std::optional<DType> dtype) {
  TESSERA_CHECK(x.defined(), "[prod] got an undefined tensor");
  return prod(x.reshape({-1}), 0, false, dtype);
}

Tensor prod(const Tensor& x, int64_t dim, bool keepdim, std::optional<DType> dtype) {
  TESSERA_CHECK(x.defined(), "[prod] got an undefined tensor");
  const int64_t d = normalize_dim(dim, std::max<int64_t>(x.dim(), 1), "prod");
  Tensor input = as_accumulated(x, dtype);
  if (input.dtype() == DType::boolean) {  // prod=bool is "all"
    return prod(input.to(DType::i64), dim, keepdim).to(DType::boolean);
  }
  // An explicit dtype is the result's (cumprod would widen integers to i64).
  const std::optional<DType> keep = dtype ? std::optional<DType>(input.dtype()) : std::nullopt;
  if (x.dim() == 0) return cumprod(input, 0, keep);
  const int64_t n = x.size(d);
  if (n == 0) {
    Shape shape = x.shape();
    shape[d] = 1;
    Tensor unit = ones(shape, input.dtype());
    return keepdim ? unit : unit.squeeze(d);
  }
  // The last running product: cumprod's gradient is exact with zeros.
  Tensor last = cumprod(input, d, keep).narrow(d, n - 1, 1);
  return keepdim ? last : last.squeeze(d);
}

Tensor all(const Tensor& x) {
  Tensor zero_count = sum(logical_not(nonzero_mask(x, "all")));
  return logical_result(x, eq(zero_count, 0));
}

Tensor all(const Tensor& x, int64_t dim, bool keepdim) {
  const int64_t d = normalize_dim(dim, std::max<int64_t>(x.dim(), 1), "all");
  Tensor mask = logical_not(nonzero_mask(x, "all"));
  Dims dims = x.dim() == 0 ? Dims{} : Dims{d};
  return logical_result(x, eq(sum(mask, dims, keepdim), 0));
}

Tensor any(const Tensor& x) {
  return logical_result(x, gt(sum(nonzero_mask(x, "any")), 0));
}

Tensor any(const Tensor& x, int64_t dim, bool keepdim) {
  const int64_t d = normalize_dim(dim, std::max<int64_t>(x.dim(), 1), "any");
  Dims dims = x.dim() == 0 ? Dims{} : Dims{d};
  return logical_result(x, gt(sum(nonzero_mask(x, "any"), dims, keepdim), 0));
}

Tensor count_nonzero(const Tensor& x, const Dims& dims) {
  return sum(nonzero_mask(x, "count_nonzero"), dims);
}

std::tuple<Tensor, Tensor> var_mean(const Tensor& x, const Dims& dims, int64_t correction,
                                    bool keepdim) {
  return {var(x, dims, correction, keepdim), mean(x, dims, keepdim)};
}

std::tuple<Tensor, Tensor> std_mean(const Tensor& x, const Dims& dims, int64_t correction,
                                    bool keepdim) {
  return {tessera::std(x, dims, correction, keepdim), mean(x, dims, keepdim)};
}

}  // namespace tessera
