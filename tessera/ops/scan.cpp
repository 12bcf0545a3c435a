// Scans (cumsum, cumprod) and sorting (sort, topk) along one dim. Kernels:
// backend/cpu/scan.cpp, which view the input as [outer, size, inner].
//
// Gradients: cumsum's is the reversed running sum of the gradient (the op's
// "reverse" attribute); cumprod's comes from its own kernel, exact with zeros
// in the input; sort's and topk's scatter the gradient back to where each
// value came from.

#include "tessera/ops/scan.h"

#include "tessera/ops/creation.h"
#include "tessera/ops/elementwise.h"
#include "tessera/ops/index.h"
#include "tessera/ops/op.h"

namespace tessera {

namespace {

// Any dim other than the scanned one may be split; a split of it would need
// the running value of the shards before.
std::vector<SbpSignature> along_dim_splits(const MetaVector& in, const Attrs& attrs,
                                           size_t num_outputs) {
  std::vector<SbpSignature> signatures;
  const int64_t dim = attrs.i("dim");
  for (int64_t d = 0; d < static_cast<int64_t>(in[0].shape.size()); ++d) {
    if (d == dim) continue;
    signatures.push_back({std::vector<Sbp>(in.size(), Sbp::split(d)),
                          std::vector<Sbp>(num_outputs, Sbp::split(d))});
  }
  return signatures;
}

Tensor cumsum_along(const Tensor& x, int64_t dim, bool reverse);

const OpDef& cumsum_op = register_op([] {
  OpDef def;
  def.name = "cumsum";
  def.contiguous_inputs = true;  // the kernel reads dense rows
  def.torch_name = "torch.cumsum";
  def.signature = "cumsum(x, dim, dtype)";
  def.infer = [](const MetaVector& in, const Attrs&) { return MetaVector{in[0]}; };
  def.sbp = [](const MetaVector& in, const Attrs& attrs) {
    auto signatures = along_dim_splits(in, attrs, 1);
    // A running sum is linear: partial sums stay partial.
    signatures.push_back({{Sbp::partial_sum()}, {Sbp::partial_sum()}});
    return signatures;
  };
  def.saves_inputs = false;
  def.grad = [](const GradContext& c) {
    return std::vector<Tensor>{
        cumsum_along(c.grad_output(0), c.attrs().i("dim"), !c.attrs().b("reverse"))};
  };
  return def;
}());

Tensor cumsum_along(const Tensor& x, int64_t dim, bool reverse) {
  return call1(cumsum_op, {x}, {{"dim", dim}, {"reverse", reverse}});
}

// d(input) of cumprod from (grad, input, output), exact where the input
// has zeros. Its own gradient is not implemented.
const OpDef& cumprod_backward_op = register_op([] {
  OpDef def;
  def.name = "cumprod_backward";
  def.contiguous_inputs = true;  // the kernel reads dense rows
  def.torch_name = "internal";
  def.signature = "cumprod's gradient";
  def.kernel_dtype_input = 1;
  def.infer = [](const MetaVector& in, const Attrs&) { return MetaVector{in[1]}; };
  def.sbp = [](const MetaVector& in, const Attrs& attrs) { return along_dim_splits(in, attrs, 1); };
  def.grad = [](const GradContext&) -> std::vector<Tensor> {
    TESSERA_FAIL("[cumprod] second-order gradients of cumprod are not implemented");
    return {};
  };
  return def;
}());

const OpDef& cumprod_op = register_op([] {
  OpDef def;
  def.name = "cumprod";
  def.contiguous_inputs = true;  // the kernel reads dense rows
  def.torch_name = "torch.cumprod";
  def.signature = "cumprod(x, dim, dtype)";
  def.infer = [](const MetaVector& in, const Attrs&) { return MetaVector{in[0]}; };
  def.sbp = [](const MetaVector& in, const Attrs& attrs) { return along_dim_splits(in, attrs, 1); };
  def.saves_outputs = true;
  def.grad = [](const GradContext& c) {
    return std::vector<Tensor>{call1(cumprod_backward_op,
                                     {c.grad_output(0), c.input(0), c.output(0)},
                                     {{"dim", c.attrs().i("dim")}})};
  };
  return def;
}());

// The gradient of values gathered from x at `indices` along dim.
Tensor scatter_back(const GradContext& c) {
  const Tensor& g = c.grad_output(0);
  Tensor indices = c.output(1);
  Tensor base = zeros_for(c.input_meta(0));
  if (!g.defined()) return base;
  return scatter_add(base, c.attrs().i("dim"), indices, g);
}

MetaVector infer_values_indices(const TensorMeta& x, int64_t dim, int64_t size) {
  TensorMeta values = x;
  if (!values.shape.empty()) values.shape[dim] = size;
  TensorMeta indices = values;
  indices.dtype = DType::i64;
  return {values, indices};
}

const OpDef& sort_op = register_op([] {
  OpDef def;
  def.name = "sort";
  def.contiguous_inputs = true;  // the kernel reads dense rows
  def.torch_name = "torch.sort, torch.argsort";
  def.signature = "sort(x, dim, descending, stable), argsort(x, dim, descending, stable)";
  def.infer = [](const MetaVector& in, const Attrs& attrs) {
    const int64_t dim = attrs.i("dim");
    return infer_values_indices(in[0], dim, in[0].shape.empty() ? 1 : in[0].shape[dim]);
  };
  def.sbp = [](const MetaVector& in, const Attrs& attrs) { return along_dim_splits(in, attrs, 2); };
  def.saves_inputs = false;
  def.saves_outputs = true;
  def.grad = [](const GradContext& c) { return std::vector<Tensor>{scatter_back(c)}; };
  return def;
}());

const OpDef& topk_op = register_op([] {
  OpDef def;
  def.name = "topk";
  def.contiguous_inputs = true;  // the kernel reads dense rows
  def.torch_name = "torch.topk";
  def.signature = "topk(x, k, dim, largest, sorted)";
  def.infer = [](const MetaVector& in, const Attrs& attrs) {
    return infer_values_indices(in[0], attrs.i("dim"), attrs.i("k"));
  };
  def.sbp = [](const MetaVector& in, const Attrs& attrs) { return along_dim_splits(in, attrs, 2); };
  def.saves_inputs = false;
  def.saves_outputs = true;
  def.grad = [](const GradContext& c) { return std::vector<Tensor>{scatter_back(c)}; };
  return def;
}());

// The input checked, its dim normalised (a 0-d tensor scans its one element
// along dim 0 or -1, as PyTorch allows).
int64_t checked_dim(const Tensor& x, int64_t dim, const char* op) {
  TESSERA_CHECK(x.defined(), "[", op, "] got an undefined tensor");
  return normalize_dim(dim, std::max<int64_t>(x.dim(), 1), op);
}

// The dtype a running sum or product accumulates in.
Tensor scan_input(const Tensor& x, std::optional<DType> dtype) {
  if (dtype) return x.dtype() == *dtype ? x : cast(x, *dtype);
  return is_floating(x.dtype()) ? x : cast(x, DType::i64);
}

Tensor scan(const OpDef& op, const Tensor& x, int64_t dim, std::optional<DType> dtype) {
  const int64_t d = checked_dim(x, dim, op.name.c_str());
  Tensor input = scan_input(x, dtype);
  if (x.dim() == 0) return scan(op, input.reshape({1}), 0, std::nullopt).reshape({});
  Attrs attrs{{"dim", d}};
  if (&op == &cumsum_op) attrs.set("reverse", false);
  return call1(op, {input}, attrs);
}

void check_sortable(const Tensor& x, const char* op) {
  TESSERA_CHECK(x.dtype() != DType::boolean, "[", op, "] does not sort bool tensors in Tessera; ",
                "cast to u8 first");
}

}  // namespace

Tensor cumsum(const Tensor& x, int64_t dim, std::optional<DType> dtype) {
  return scan(cumsum_op, x, dim, dtype);
}

Tensor cumprod(const Tensor& x, int64_t dim, std::optional<DType> dtype) {
  return scan(cumprod_op, x, dim, dtype);
}

std::tuple<Tensor, Tensor> sort(const Tensor& x, int64_t dim, bool descending, bool stable) {
  const int64_t d = checked_dim(x, dim, "sort");
  if (x.dtype() == DType::boolean) {  // false before true, as PyTorch sorts bools
    auto [values, indices] = sort(x.to(DType::u8), dim, descending, stable);
    return {values.to(DType::boolean), indices};
  }
  if (x.dim() == 0) {
    auto [values, indices] = sort(x.reshape({1}), 0, descending, stable);
    return {values.reshape({}), indices.reshape({})};
  }
  std::vector<Tensor> out =
      call(sort_op, {x}, {{"dim", d}, {"descending", descending}, {"stable", stable}});
  return {out[0], out[1]};
}

Tensor argsort(const Tensor& x, int64_t dim, bool descending, bool stable) {
  return std::get<1>(sort(x, dim, descending, stable));
}

std::tuple<Tensor, Tensor> topk(const Tensor& x, int64_t k, int64_t dim, bool largest,
                                bool sorted) {
  const int64_t d = checked_dim(x, dim, "topk");
  check_sortable(x, "topk");
  const int64_t size = x.dim() == 0 ? 1 : x.size(d);
  TESSERA_CHECK(k >= 0 && k <= size, "[topk] k = ", k, " is out of range for dim ", dim,
                " of size ", size, " (shape ", shape_str(x.shape()), "); valid: 0 <= k <= ", size);
  if (x.dim() == 0) {
    // PyTorch returns the element itself for k = 0 too.
    auto [values, indices] = topk(x.reshape({1}), 1, 0, largest, sorted);
    return {values.reshape({}), indices.reshape({})};
  }
  std::vector<Tensor> out =
      call(topk_op, {x}, {{"k", k}, {"dim", d}, {"largest", largest}, {"sorted", sorted}});
  return {out[0], out[1]};
}

}  // namespace tessera
