// Max, average and adaptive pooling. max_pool2d's gradient is
// max_pool2d_backward, whose gradient (with respect to grad_output) is
// max_pool2d_select, whose gradient is max_pool2d_backward again; avg_pool2d
// and avg_pool2d_backward are each other's adjoints. The adaptive ops share
// those gradient ops: their attrs carry "output_size" instead of a kernel,
// and every pooling op and kernel reads either form. 1-D pooling is 2-D
// pooling over a height of one. Kernels: backend/cpu/pool.cpp.

#include "tessera/ops/pool.h"

#include <algorithm>

#include "tessera/ops/op.h"
#include "tessera/ops/sbp_rules.h"

namespace tessera {

namespace {

using Ints = std::vector<int64_t>;

const Sbp kB = Sbp::broadcast();

// Canonical pooling attrs: kernel_size, stride (resolved), padding, and only
// where they differ from the defaults dilation (max pooling), ceil_mode and
// divisor_override (average pooling), so default calls keep their attrs.
Attrs pool_attrs(const Ints& kernel, const Ints& stride, const Ints& padding, const Ints& dilation,
                 bool ceil_mode, const char* op) {
  auto check_pair = [op](const Ints& values, const char* name, int64_t min) {
    TESSERA_CHECK(values.size() == 2, "[", op, "] ", name, " needs 2 values (height, width), got ",
                  values.size(), " (", shape_str(values), ")");
    TESSERA_CHECK(values[0] >= min && values[1] >= min, "[", op, "] ", name, " must be >= ", min,
                  ", got ", shape_str(values));
  };
  check_pair(kernel, "kernel_size", 1);
  Ints resolved = stride.empty() ? kernel : stride;
  check_pair(resolved, "stride", 1);
  check_pair(padding, "padding", 0);
  Ints dilated = dilation.empty() ? Ints{1, 1} : dilation;
  check_pair(dilated, "dilation", 1);
  for (int d = 0; d < 2; ++d) {
    TESSERA_CHECK(padding[d] <= kernel[d] / 2, "[", op, "] padding ", shape_str(padding),
                  " must be at most half the kernel size ", shape_str(kernel));
  }
  Attrs attrs{{"kernel_size", kernel}, {"stride", resolved}, {"padding", padding}};
  if (!dilation.empty()) attrs.set("dilation", dilation);
  if (ceil_mode) attrs.set("ceil_mode", true);
  return attrs;
}

Ints dilation_of(const Attrs& attrs) {
  return attrs.has("dilation") ? attrs.ints("dilation") : Ints{1, 1};
}

bool ceil_mode_of(const Attrs& attrs) { return attrs.has("ceil_mode") && attrs.b("ceil_mode"); }

// PyTorch's pooling_output_shape: with ceil_mode the size rounds up, but the
// last window must start inside the input or its left padding.
int64_t pooled_length(int64_t size, int64_t kernel, int64_t stride, int64_t padding,
                      int64_t dilation, bool ceil_mode, const char* op) {
  if (!ceil_mode) return window_output_size(size, kernel, stride, padding, dilation, op);
  const int64_t extent = checked_add(checked_mul(dilation, kernel - 1, op), 1, op);
  const int64_t padded = checked_add(size, checked_mul(2, padding, op), op);
  const int64_t numerator = checked_add(padded - extent, stride - 1, op);
  // Floor division: a kernel larger than the input gives a negative numerator.
  int64_t length = (numerator >= 0 ? numerator / stride : -((-numerator + stride - 1) / stride)) + 1;
  if (length >= 1 && (length - 1) * stride >= size + padding) --length;
  return std::max<int64_t>(length, 0);
}

// Output shape of pooling x (3-D or 4-D) with canonical attrs, fixed or adaptive.
Shape pooled_shape(const Shape& x, const Attrs& attrs, const char* op) {
  TESSERA_CHECK(x.size() == 3 || x.size() == 4, "[", op, "] expects a 3-D [C, H, W] or 4-D ",
                "[N, C, H, W] input, got ", shape_str(x));
  Shape out(x.begin(), x.end() - 2);
  if (attrs.has("output_size")) {
    // As PyTorch: only the pooled dims must be non-empty.
    for (size_t d = x.size() - 2; d < x.size(); ++d) {
      TESSERA_CHECK(x[d] > 0, "[", op, "] input ", shape_str(x), " has an empty spatial dim (dim ",
                    d, ")");
    }
    const Ints& size = attrs.ints("output_size");
    out.insert(out.end(), size.begin(), size.end());
    return out;
  }
  const Ints& kernel = attrs.ints("kernel_size");
  const Ints& stride = attrs.ints("stride");
  const Ints& padding = attrs.ints("padding");
  Ints dilation = dilation_of(attrs);
  // As PyTorch: only a 4-D input's batch may be empty.
  for (size_t d = x.size() == 4 ? 1 : 0; d < x.size(); ++d) {
    TESSERA_CHECK(x[d] > 0, "[", op, "] input ", shape_str(x), " has an empty ",
                  d + 2 >= x.size() ? "spatial" : "channel", " dim (dim ", d,
                  "); only the batch dim of a 4-D input may be 0");
  }
  for (int d = 0; d < 2; ++d) {
    int64_t size = x[x.size() - 2 + d];
    int64_t length = pooled_length(size, kernel[d], stride[d], padding[d], dilation[d],
                                   ceil_mode_of(attrs), op);
    TESSERA_CHECK(length >= 1, "[", op, "] kernel ", shape_str(kernel), " (dilation ",
                  shape_str(dilation), ") does not fit input ", shape_str(x), " with padding ",
                  shape_str(padding), "; the output would be empty");
    out.push_back(length);
  }
  return out;
}

void check_floating(const TensorMeta& meta, const char* op) {
  TESSERA_CHECK(is_floating(meta.dtype), "[", op, "] needs a floating tensor, got ",
                dtype_name(meta.dtype));
}

// Splits of the leading (batch/channel) dims, which pool independently.
std::vector<SbpSignature> plane_splits(size_t num_inputs, const Shape& shape,
                                       size_t num_outputs = 1) {
  Ints axes;
  for (int64_t d = 0; d + 2 < static_cast<int64_t>(shape.size()); ++d) axes.push_back(d);
  return same_split_signatures(num_inputs, num_outputs, axes);
}

Ints spatial(const Shape& shape) { return {shape[shape.size() - 2], shape.back()}; }

TensorMeta pooled_meta(const TensorMeta& x, const Attrs& attrs, const char* op) {
  check_floating(x, op);
  return {pooled_shape(x.shape, attrs, op), x.dtype, x.device};
}

// ---- max pooling ----------------------------------------------------------

const OpDef& max_pool_backward_op_ref();
const OpDef& max_pool_select_op_ref();

std::vector<Tensor> max_pool_grad(const GradContext& c) {
  return {call1(max_pool_backward_op_ref(), {c.grad_output(0), c.input(0)}, c.attrs())};
}

// Values and indices; the indices carry no gradient.
MetaVector infer_with_indices(const MetaVector& in, const Attrs& attrs, const char* op) {
  TensorMeta values = pooled_meta(in[0], attrs, op);
  TensorMeta indices = values;
  indices.dtype = DType::i64;
  return {values, indices};
}

const OpDef& max_pool_op = register_op([] {
  OpDef def;
  def.name = "max_pool2d";
  def.contiguous_inputs = true;
  def.torch_name = "torch.nn.functional.max_pool2d, torch.nn.functional.max_pool1d";
  def.signature =
      "max_pool2d(x, kernel_size, stride, padding, dilation, ceil_mode); "
      "max_pool1d(x, kernel_size, stride, padding, dilation, ceil_mode)";
  def.infer = [](const MetaVector& in, const Attrs& attrs) {
    return MetaVector{pooled_meta(in[0], attrs, "max_pool2d")};
  };
  def.sbp = [](const MetaVector& in, const Attrs&) {
    auto signatures = plane_splits(1, in[0].shape);
    // The max of maxima over ranks is the max over the window of the max over ranks.
    signatures.push_back(uniform_signature(1, 1, Sbp::partial_max()));
    return signatures;
  };
  def.grad = max_pool_grad;
  return def;
}());

const OpDef& max_pool_indices_op = register_op([] {
  OpDef def;
  def.name = "max_pool2d_with_indices";
  def.contiguous_inputs = true;
  def.torch_name =
      "torch.nn.functional.max_pool2d(return_indices=True), "
      "torch.nn.functional.max_pool1d(return_indices=True)";
  def.signature =
      "max_pool2d_with_indices(x, kernel_size, stride, padding, dilation, ceil_mode); "
      "max_pool1d_with_indices(x, kernel_size, stride, padding, dilation, ceil_mode)";
  def.infer = [](const MetaVector& in, const Attrs& attrs) {
    return infer_with_indices(in, attrs, "max_pool2d_with_indices");
  };
  def.sbp = [](const MetaVector& in, const Attrs&) { return plane_splits(1, in[0].shape, 2); };
  def.grad = max_pool_grad;
  return def;
}());

const OpDef& adaptive_max_pool_op = register_op([] {
  OpDef def;
  def.name = "adaptive_max_pool2d";
  def.contiguous_inputs = true;
  def.torch_name = "torch.nn.functional.adaptive_max_pool2d, torch.nn.functional.adaptive_max_pool1d";
  def.signature =
      "adaptive_max_pool2d(x, output_size); adaptive_max_pool2d_with_indices(x, output_size); "
      "adaptive_max_pool1d(x, output_size); adaptive_max_pool1d_with_indices(x, output_size)";
  def.infer = [](const MetaVector& in, const Attrs& attrs) {
    // As PyTorch: unlike adaptive_avg_pool2d, every dim but the first must be non-empty.
    const Shape& x = in[0].shape;
    for (size_t d = 1; d < x.size(); ++d) {
      TESSERA_CHECK(x[d] > 0, "[adaptive_max_pool2d] input ", shape_str(x), " has an empty dim ",
                    d, "; only the first dim may be 0");
    }
    return infer_with_indices(in, attrs, "adaptive_max_pool2d");
  };
  def.sbp = [](const MetaVector& in, const Attrs&) { return plane_splits(1, in[0].shape, 2); };
  def.grad = max_pool_grad;
  return def;
}());

const OpDef& max_pool_backward_op = register_op([] {
  OpDef def;
  def.name = "max_pool2d_backward";
  def.contiguous_inputs = true;
  def.torch_name = "torch.ops.aten.max_pool2d_with_indices_backward";
  def.signature = "max_pool2d_backward(grad_output, x, kernel_size, stride, padding, dilation, "
                  "ceil_mode)";
  def.kernel_dtype_input = 1;
  def.infer = [](const MetaVector& in, const Attrs& attrs) {
    const char* op = "max_pool2d_backward";
    check_floating(in[1], op);
    TESSERA_CHECK(in[0].dtype == in[1].dtype, "[", op, "] grad_output and input must share a ",
                  "dtype, got ", dtype_name(in[0].dtype), " and ", dtype_name(in[1].dtype));
    Shape pooled = pooled_shape(in[1].shape, attrs, op);
    TESSERA_CHECK(in[0].shape == pooled, "[", op, "] grad_output has shape ",
                  shape_str(in[0].shape), " but pooling input ", shape_str(in[1].shape),
                  " gives ", shape_str(pooled));
    return MetaVector{in[1]};
  };
  def.sbp = [](const MetaVector& in, const Attrs&) {
    auto signatures = plane_splits(2, in[1].shape);
    // Linear in grad_output for a fixed input.
    signatures.push_back({{Sbp::partial_sum(), kB}, {Sbp::partial_sum()}});
    return signatures;
  };
  // Piecewise constant in x: only grad_output gets a gradient.
  def.grad = [](const GradContext& c) {
    std::vector<Tensor> grads(2);
    if (c.needs_input_grad(0)) {
      grads[0] = call1(max_pool_select_op_ref(), {c.input(1), c.grad_output(0)}, c.attrs());
    }
    return grads;
  };
  return def;
}());

const OpDef& max_pool_select_op = register_op([] {
  OpDef def;
  def.name = "max_pool2d_select";
  def.contiguous_inputs = true;
  def.torch_name = "internal";
  def.signature = "max_pool2d_select(x, source, kernel_size, stride, padding, dilation, ceil_mode)";
  def.infer = [](const MetaVector& in, const Attrs& attrs) {
    const char* op = "max_pool2d_select";
    check_floating(in[0], op);
    TESSERA_CHECK(in[0].dtype == in[1].dtype && in[0].shape == in[1].shape, "[", op,
                  "] source must match x in shape and dtype: x is ", shape_str(in[0].shape), " (",
                  dtype_name(in[0].dtype), "), source is ", shape_str(in[1].shape), " (",
                  dtype_name(in[1].dtype), ")");
    return MetaVector{{pooled_shape(in[0].shape, attrs, op), in[0].dtype, in[0].device}};
  };
  def.sbp = [](const MetaVector& in, const Attrs&) {
    auto signatures = plane_splits(2, in[0].shape);
    // Selection commutes with any reduction over ranks of the source.
    for (Sbp partial : {Sbp::partial_sum(), Sbp::partial_max(), Sbp::partial_min()}) {
      signatures.push_back({{kB, partial}, {partial}});
    }
    return signatures;
  };
  def.grad = [](const GradContext& c) {
    std::vector<Tensor> grads(2);
    if (c.needs_input_grad(1)) {
      grads[1] = call1(max_pool_backward_op, {c.grad_output(0), c.input(0)}, c.attrs());
    }
    return grads;
  };
  return def;
}());

const OpDef& max_pool_backward_op_ref() { return max_pool_backward_op; }
const OpDef& max_pool_select_op_ref() { return max_pool_select_op; }

// ---- average pooling ------------------------------------------------------

std::vector<SbpSignature> linear_pool_sbp(const MetaVector& in, const Attrs&) {
  auto signatures = plane_splits(1, in[0].shape);
  signatures.push_back(uniform_signature(1, 1, Sbp::partial_sum()));
  return signatures;
}

const OpDef& avg_pool_backward_op_ref();

std::vector<Tensor> avg_pool_grad(const GradContext& c) {
  Attrs attrs = c.attrs();
  attrs.set("input_size", spatial(c.input_meta(0).shape));
  return {call1(avg_pool_backward_op_ref(), {c.grad_output(0)}, attrs)};
}

const OpDef& avg_pool_op = register_op([] {
  OpDef def;
  def.name = "avg_pool2d";
  def.contiguous_inputs = true;
  def.torch_name = "torch.nn.functional.avg_pool2d, torch.nn.functional.avg_pool1d";
  def.signature =
      "avg_pool2d(x, kernel_size, stride, padding, count_include_pad, ceil_mode, "
      "divisor_override); avg_pool1d(x, kernel_size, stride, padding, count_include_pad, "
      "ceil_mode)";
  def.infer = [](const MetaVector& in, const Attrs& attrs) {
    return MetaVector{pooled_meta(in[0], attrs, "avg_pool2d")};
  };
  def.sbp = linear_pool_sbp;
  def.saves_inputs = false;
  def.grad = avg_pool_grad;
  return def;
}());

const OpDef& adaptive_avg_pool_op = register_op([] {
  OpDef def;
  def.name = "adaptive_avg_pool2d";
  def.contiguous_inputs = true;
  def.torch_name = "torch.nn.functional.adaptive_avg_pool2d, torch.nn.functional.adaptive_avg_pool1d";
  def.signature = "adaptive_avg_pool2d(x, output_size); adaptive_avg_pool1d(x, output_size)";
  def.infer = [](const MetaVector& in, const Attrs& attrs) {
    return MetaVector{pooled_meta(in[0], attrs, "adaptive_avg_pool2d")};
  };
  def.sbp = linear_pool_sbp;
  def.saves_inputs = false;
  def.grad = avg_pool_grad;
  return def;
}());

const OpDef& avg_pool_backward_op = register_op([] {
  OpDef def;
  def.name = "avg_pool2d_backward";
  def.contiguous_inputs = true;
  def.torch_name = "torch.ops.aten.avg_pool2d_backward";
  def.signature = "avg_pool2d_backward(grad_output, input_hw, kernel_size, stride, padding, "
                  "count_include_pad, ceil_mode, divisor_override)";
  def.infer = [](const MetaVector& in, const Attrs& attrs) {
    const char* op = "avg_pool2d_backward";
    check_floating(in[0], op);
    TESSERA_CHECK(in[0].shape.size() == 3 || in[0].shape.size() == 4, "[", op,
                  "] expects a 3-D or 4-D grad_output, got ", shape_str(in[0].shape));
    const Ints& hw = attrs.ints("input_size");
    Shape input(in[0].shape.begin(), in[0].shape.end() - 2);
    input.insert(input.end(), hw.begin(), hw.end());
    Shape pooled = pooled_shape(input, attrs, op);
    TESSERA_CHECK(in[0].shape == pooled, "[", op, "] grad_output has shape ",
                  shape_str(in[0].shape), " but pooling an input of size ", shape_str(hw),
                  " gives ", shape_str(pooled));
    return MetaVector{{input, in[0].dtype, in[0].device}};
  };
  def.sbp = linear_pool_sbp;
  def.saves_inputs = false;
  def.grad = [](const GradContext& c) {
    const OpDef& forward = c.attrs().has("output_size") ? adaptive_avg_pool_op : avg_pool_op;
    return std::vector<Tensor>{call1(forward, {c.grad_output(0)}, c.attrs())};
  };
  return def;
}());

const OpDef& avg_pool_backward_op_ref() { return avg_pool_backward_op; }

Tensor checked(const Tensor& x, const char* op, const char* what) {
  TESSERA_CHECK(x.defined(), "[", op, "] ", what, " is an undefined tensor");
  return x;
}

Ints pair(int64_t value) { return {value, value}; }

// 1-D pooling runs 2-D pooling on x with a height of one inserted.
Tensor as_2d(const Tensor& x, const char* op) {
  checked(x, op, "input");
  TESSERA_CHECK(x.dim() == 2 || x.dim() == 3, "[", op, "] expects a 2-D [C, L] or 3-D [N, C, L] ",
                "input, got ", shape_str(x.shape()));
  return x.unsqueeze(-2);
}

Attrs pool1d_attrs(int64_t kernel_size, std::optional<int64_t> stride, int64_t padding,
                   int64_t dilation, bool ceil_mode, const char* op) {
  return pool_attrs({1, kernel_size}, {1, stride.value_or(kernel_size)}, {0, padding},
                    {1, dilation}, ceil_mode, op);
}

Attrs adaptive_attrs(const Tensor& x, const Ints& output_size, const char* op) {
  checked(x, op, "input");
  TESSERA_CHECK(x.dim() == 3 || x.dim() == 4, "[", op, "] expects a 3-D [C, H, W] or 4-D ",
                "[N, C, H, W] input, got ", shape_str(x.shape()));
  TESSERA_CHECK(output_size.size() == 2 && output_size[0] >= -1 && output_size[1] >= -1, "[", op,
                "] output_size needs 2 values >= 0 (or -1 to keep the input size), got ",
                shape_str(output_size));
  Ints size = output_size;
  for (int d = 0; d < 2; ++d) {
    if (size[d] == -1) size[d] = x.size(d - 2);
  }
  return {{"output_size", size}};
}

std::pair<Tensor, Tensor> two(const std::vector<Tensor>& outputs) {
  return {outputs[0], outputs[1]};
}

}  // namespace

Tensor max_pool2d(const Tensor& x, const Ints& kernel_size, const Ints& stride,
                  const Ints& padding, const Ints& dilation, bool ceil_mode) {
  Attrs attrs = pool_attrs(kernel_size, stride, padding, dilation, ceil_mode, "max_pool2d");
  return call1(max_pool_op, {checked(x, "max_pool2d", "input")}, attrs);
}

Tensor max_pool2d(const Tensor& x, int64_t kernel_size, std::optional<int64_t> stride,
                  int64_t padding, int64_t dilation, bool ceil_mode) {
  return max_pool2d(x, pair(kernel_size), pair(stride.value_or(kernel_size)), pair(padding),
                    pair(dilation), ceil_mode);
}

std::pair<Tensor, Tensor> max_pool2d_with_indices(const Tensor& x, const Ints& kernel_size,
                                                  const Ints& stride, const Ints& padding,
                                                  const Ints& dilation, bool ceil_mode) {
  const char* op = "max_pool2d_with_indices";
  Attrs attrs = pool_attrs(kernel_size, stride, padding, dilation, ceil_mode, op);
  return two(call(max_pool_indices_op, {checked(x, op, "input")}, attrs));
}

Tensor avg_pool2d(const Tensor& x, const Ints& kernel_size, const Ints& stride,
                  const Ints& padding, bool count_include_pad, bool ceil_mode,
                  std::optional<int64_t> divisor_override) {
  if (x.defined() && is_integral(x.dtype())) {
    // PyTorch averages integer tensors with integer division (towards
    // zero), which f64 followed by the cast reproduces exactly.
    return avg_pool2d(x.to(DType::f64), kernel_size, stride, padding, count_include_pad, ceil_mode,
                      divisor_override)
        .to(x.dtype());
  }
  Attrs attrs = pool_attrs(kernel_size, stride, padding, {}, ceil_mode, "avg_pool2d");
  attrs.set("count_include_pad", count_include_pad);
  if (divisor_override) {
    TESSERA_CHECK(*divisor_override != 0, "[avg_pool2d] divisor_override must not be zero");
    attrs.set("divisor_override", *divisor_override);
  }
  return call1(avg_pool_op, {checked(x, "avg_pool2d", "input")}, attrs);
}

Tensor avg_pool2d(const Tensor& x, int64_t kernel_size, std::optional<int64_t> stride,
                  int64_t padding, bool count_include_pad, bool ceil_mode,
                  std::optional<int64_t> divisor_override) {
  return avg_pool2d(x, pair(kernel_size), pair(stride.value_or(kernel_size)), pair(padding),
                    count_include_pad, ceil_mode, divisor_override);
}

Tensor max_pool1d(const Tensor& x, int64_t kernel_size, std::optional<int64_t> stride,
                  int64_t padding, int64_t dilation, bool ceil_mode) {
  const char* op = "max_pool1d";
  Attrs attrs = pool1d_attrs(kernel_size, stride, padding, dilation, ceil_mode, op);
  return call1(max_pool_op, {as_2d(x, op)}, attrs).squeeze(-2);
}

std::pair<Tensor, Tensor> max_pool1d_with_indices(const Tensor& x, int64_t kernel_size,
                                                  std::optional<int64_t> stride, int64_t padding,
                                                  int64_t dilation, bool ceil_mode) {
  const char* op = "max_pool1d_with_indices";
  Attrs attrs = pool1d_attrs(kernel_size, stride, padding, dilation, ceil_mode, op);
  auto outputs = call(max_pool_indices_op, {as_2d(x, op)}, attrs);
  return {outputs[0].squeeze(-2), outputs[1].squeeze(-2)};
}

Tensor avg_pool1d(const Tensor& x, int64_t kernel_size, std::optional<int64_t> stride,
                  int64_t padding, bool count_include_pad, bool ceil_mode) {
  const char* op = "avg_pool1d";
  if (x.defined() && is_integral(x.dtype())) {  // as avg_pool2d
    return avg_pool1d(x.to(DType::f64), kernel_size, stride, padding, count_include_pad, ceil_mode)
        .to(x.dtype());
  }
  Attrs attrs = pool_attrs({1, kernel_size}, {1, stride.value_or(kernel_size)}, {0, padding}, {},
                           ceil_mode, op);
  attrs.set("count_include_pad", count_include_pad);
  return call1(avg_pool_op, {as_2d(x, op)}, attrs).squeeze(-2);
}

std::pair<Tensor, Tensor> adaptive_max_pool2d_with_indices(const Tensor& x,
                                                           const Ints& output_size) {
  Attrs attrs = adaptive_attrs(x, output_size, "adaptive_max_pool2d");
  return two(call(adaptive_max_pool_op, {x}, attrs));
}

Tensor adaptive_max_pool2d(const Tensor& x, const Ints& output_size) {
  return adaptive_max_pool2d_with_indices(x, output_size).first;
}

Tensor adaptive_max_pool2d(const Tensor& x, int64_t output_size) {
  return adaptive_max_pool2d(x, pair(output_size));
}

Tensor adaptive_avg_pool2d(const Tensor& x, const Ints& output_size) {
  Attrs attrs = adaptive_attrs(x, output_size, "adaptive_avg_pool2d");
  return call1(adaptive_avg_pool_op, {x}, attrs);
}

Tensor adaptive_avg_pool2d(const Tensor& x, int64_t output_size) {
  return adaptive_avg_pool2d(x, pair(output_size));
}

Tensor adaptive_max_pool1d(const Tensor& x, int64_t output_size) {
  return adaptive_max_pool1d_with_indices(x, output_size).first;
}

std::pair<Tensor, Tensor> adaptive_max_pool1d_with_indices(const Tensor& x, int64_t output_size) {
  Tensor plane = as_2d(x, "adaptive_max_pool1d");
  auto [values, indices] = adaptive_max_pool2d_with_indices(plane, {1, output_size});
  return {values.squeeze(-2), indices.squeeze(-2)};
}

Tensor adaptive_avg_pool1d(const Tensor& x, int64_t output_size) {
  Tensor plane = as_2d(x, "adaptive_avg_pool1d");
  return adaptive_avg_pool2d(plane, {1, output_size}).squeeze(-2);
}

Tensor max_pool2d_backward(const Tensor& grad_output, const Tensor& x, const Ints& kernel_size,
                           const Ints& stride, const Ints& padding, const Ints& dilation,
                           bool ceil_mode) {
  const char* op = "max_pool2d_backward";
  Attrs attrs = pool_attrs(kernel_size, stride, padding, dilation, ceil_mode, op);
  return call1(max_pool_backward_op,
               {checked(grad_output, op, "grad_output"), checked(x, op, "input")}, attrs);
}

Tensor max_pool2d_select(const Tensor& x, const Tensor& source, const Ints& kernel_size,
                         const Ints& stride, const Ints& padding, const Ints& dilation,
                         bool ceil_mode) {
  const char* op = "max_pool2d_select";
  Attrs attrs = pool_attrs(kernel_size, stride, padding, dilation, ceil_mode, op);
  return call1(max_pool_select_op, {checked(x, op, "input"), checked(source, op, "source")},
               attrs);
}

Tensor avg_pool2d_backward(const Tensor& grad_output, const Ints& input_hw,
                           const Ints& kernel_size, const Ints& stride, const Ints& padding,
                           bool count_include_pad, bool ceil_mode,
                           std::optional<int64_t> divisor_override) {
  const char* op = "avg_pool2d_backward";
  TESSERA_CHECK(input_hw.size() == 2 && input_hw[0] >= 0 && input_hw[1] >= 0, "[", op,
                "] input_hw needs 2 non-negative values (height, width), got ",
                shape_str(input_hw));
  Attrs attrs = pool_attrs(kernel_size, stride, padding, {}, ceil_mode, op);
  attrs.set("count_include_pad", count_include_pad).set("input_size", input_hw);
  if (divisor_override) {
    TESSERA_CHECK(*divisor_override != 0, "[", op, "] divisor_override must not be zero");
    attrs.set("divisor_override", *divisor_override);
  }
  return call1(avg_pool_backward_op, {checked(grad_output, op, "grad_output")}, attrs);
}

}  // namespace tessera
