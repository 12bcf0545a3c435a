// Max and average pooling. max_pool2d's gradient is max_pool2d_backward,
// whose gradient (with respect to grad_output) is max_pool2d_select, whose
// gradient is max_pool2d_backward again; avg_pool2d and avg_pool2d_backward
// are each other's adjoints. Kernels: backend/cpu/pool.cpp.

#include "tessera/ops/pool.h"

#include "tessera/ops/op.h"
#include "tessera/ops/sbp_rules.h"

namespace tessera {

namespace {

using Ints = std::vector<int64_t>;

const Sbp kB = Sbp::broadcast();

// Canonical pooling attrs: kernel_size, stride (resolved), padding and, for
// max pooling, dilation (average pooling passes none: it is always 1).
Attrs pool_attrs(const Ints& kernel, const Ints& stride, const Ints& padding, const Ints& dilation,
                 const char* op) {
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
    int64_t extent = checked_add(checked_mul(dilated[d], kernel[d] - 1, op), 1, op);
    TESSERA_CHECK(padding[d] <= extent / 2, "[", op, "] padding ", shape_str(padding),
                  " must be at most half the (dilated) kernel size ", shape_str(kernel));
  }
  Attrs attrs{{"kernel_size", kernel}, {"stride", resolved}, {"padding", padding}};
  if (!dilation.empty()) attrs.set("dilation", dilation);
  return attrs;
}

Ints dilation_of(const Attrs& attrs) {
  return attrs.has("dilation") ? attrs.ints("dilation") : Ints{1, 1};
}

// Output shape of pooling x (3-D or 4-D) with canonical attrs.
Shape pooled_shape(const Shape& x, const Attrs& attrs, const char* op) {
  TESSERA_CHECK(x.size() == 3 || x.size() == 4, "[", op, "] expects a 3-D [C, H, W] or 4-D ",
                "[N, C, H, W] input, got ", shape_str(x));
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
  Shape out(x.begin(), x.end() - 2);
  for (int d = 0; d < 2; ++d) {
    int64_t size = x[x.size() - 2 + d];
    int64_t length = window_output_size(size, kernel[d], stride[d], padding[d], dilation[d], op);
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
std::vector<SbpSignature> plane_splits(size_t num_inputs, const Shape& shape) {
  Ints axes;
  for (int64_t d = 0; d + 2 < static_cast<int64_t>(shape.size()); ++d) axes.push_back(d);
  return same_split_signatures(num_inputs, 1, axes);
}

Ints spatial(const Shape& shape) { return {shape[shape.size() - 2], shape.back()}; }

// ---- max pooling ----------------------------------------------------------

const OpDef& max_pool_op = register_op([] {
  OpDef def;
  def.name = "max_pool2d";
  def.infer = [](const std::vector<TensorMeta>& in, const Attrs& attrs) {
    check_floating(in[0], "max_pool2d");
    return std::vector<TensorMeta>{{pooled_shape(in[0].shape, attrs, "max_pool2d"), in[0].dtype,
                                    in[0].device}};
  };
  def.sbp = [](const std::vector<TensorMeta>& in, const Attrs&) {
    auto signatures = plane_splits(1, in[0].shape);
    // The max of maxima over ranks is the max over the window of the max over ranks.
    signatures.push_back(uniform_signature(1, 1, Sbp::partial_max()));
    return signatures;
  };
  def.grad = [](const GradContext& c) {
    const Attrs& a = c.attrs();
    return std::vector<Tensor>{max_pool2d_backward(c.grad_output(0), c.input(0),
                                                   a.ints("kernel_size"), a.ints("stride"),
                                                   a.ints("padding"), a.ints("dilation"))};
  };
  return def;
}());

const OpDef& max_pool_backward_op = register_op([] {
  OpDef def;
  def.name = "max_pool2d_backward";
  def.kernel_dtype_input = 1;
  def.infer = [](const std::vector<TensorMeta>& in, const Attrs& attrs) {
    const char* op = "max_pool2d_backward";
    check_floating(in[1], op);
    TESSERA_CHECK(in[0].dtype == in[1].dtype, "[", op, "] grad_output and input must share a ",
                  "dtype, got ", dtype_name(in[0].dtype), " and ", dtype_name(in[1].dtype));
    Shape pooled = pooled_shape(in[1].shape, attrs, op);
    TESSERA_CHECK(in[0].shape == pooled, "[", op, "] grad_output has shape ",
                  shape_str(in[0].shape), " but pooling input ", shape_str(in[1].shape),
                  " gives ", shape_str(pooled));
    return std::vector<TensorMeta>{in[1]};
  };
  def.sbp = [](const std::vector<TensorMeta>& in, const Attrs&) {
    auto signatures = plane_splits(2, in[1].shape);
    // Linear in grad_output for a fixed input.
    signatures.push_back({{Sbp::partial_sum(), kB}, {Sbp::partial_sum()}});
    return signatures;
  };
  // Piecewise constant in x: only grad_output gets a gradient.
  def.grad = [](const GradContext& c) {
    const Attrs& a = c.attrs();
    std::vector<Tensor> grads(2);
    if (c.needs_input_grad(0)) {
      grads[0] = max_pool2d_select(c.input(1), c.grad_output(0), a.ints("kernel_size"),
                                   a.ints("stride"), a.ints("padding"), a.ints("dilation"));
    }
    return grads;
  };
  return def;
}());

const OpDef& max_pool_select_op = register_op([] {
  OpDef def;
  def.name = "max_pool2d_select";
  def.infer = [](const std::vector<TensorMeta>& in, const Attrs& attrs) {
    const char* op = "max_pool2d_select";
    check_floating(in[0], op);
    TESSERA_CHECK(in[0].dtype == in[1].dtype && in[0].shape == in[1].shape, "[", op,
                  "] source must match x in shape and dtype: x is ", shape_str(in[0].shape), " (",
                  dtype_name(in[0].dtype), "), source is ", shape_str(in[1].shape), " (",
                  dtype_name(in[1].dtype), ")");
    return std::vector<TensorMeta>{{pooled_shape(in[0].shape, attrs, op), in[0].dtype,
                                    in[0].device}};
  };
  def.sbp = [](const std::vector<TensorMeta>& in, const Attrs&) {
    auto signatures = plane_splits(2, in[0].shape);
    // Selection commutes with any reduction over ranks of the source.
    for (Sbp partial : {Sbp::partial_sum(), Sbp::partial_max(), Sbp::partial_min()}) {
      signatures.push_back({{kB, partial}, {partial}});
    }
    return signatures;
  };
  def.grad = [](const GradContext& c) {
    const Attrs& a = c.attrs();
    std::vector<Tensor> grads(2);
    if (c.needs_input_grad(1)) {
      grads[1] = max_pool2d_backward(c.grad_output(0), c.input(0), a.ints("kernel_size"),
                                     a.ints("stride"), a.ints("padding"), a.ints("dilation"));
    }
    return grads;
  };
  return def;
}());

// ---- average pooling ------------------------------------------------------

std::vector<SbpSignature> linear_pool_sbp(const std::vector<TensorMeta>& in, const Attrs&) {
  auto signatures = plane_splits(1, in[0].shape);
  signatures.push_back(uniform_signature(1, 1, Sbp::partial_sum()));
  return signatures;
}

const OpDef& avg_pool_op = register_op([] {
  OpDef def;
  def.name = "avg_pool2d";
  def.infer = [](const std::vector<TensorMeta>& in, const Attrs& attrs) {
    check_floating(in[0], "avg_pool2d");
    return std::vector<TensorMeta>{{pooled_shape(in[0].shape, attrs, "avg_pool2d"), in[0].dtype,
                                    in[0].device}};
  };
  def.sbp = linear_pool_sbp;
  def.saves_inputs = false;
  def.grad = [](const GradContext& c) {
    const Attrs& a = c.attrs();
    return std::vector<Tensor>{avg_pool2d_backward(
        c.grad_output(0), spatial(c.input_meta(0).shape), a.ints("kernel_size"), a.ints("stride"),
        a.ints("padding"), a.b("count_include_pad"))};
  };
  return def;
}());

const OpDef& avg_pool_backward_op = register_op([] {
  OpDef def;
  def.name = "avg_pool2d_backward";
  def.infer = [](const std::vector<TensorMeta>& in, const Attrs& attrs) {
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
    return std::vector<TensorMeta>{{input, in[0].dtype, in[0].device}};
  };
  def.sbp = linear_pool_sbp;
  def.saves_inputs = false;
  def.grad = [](const GradContext& c) {
    const Attrs& a = c.attrs();
    return std::vector<Tensor>{avg_pool2d(c.grad_output(0), a.ints("kernel_size"),
                                          a.ints("stride"), a.ints("padding"),
                                          a.b("count_include_pad"))};
  };
  return def;
}());

Tensor checked(const Tensor& x, const char* op, const char* what) {
  TESSERA_CHECK(x.defined(), "[", op, "] ", what, " is an undefined tensor");
  return x;
}

Ints pair(int64_t value) { return {value, value}; }

}  // namespace

Tensor max_pool2d(const Tensor& x, const Ints& kernel_size, const Ints& stride,
                  const Ints& padding, const Ints& dilation) {
  Attrs attrs = pool_attrs(kernel_size, stride, padding, dilation, "max_pool2d");
  return call1(max_pool_op, {checked(x, "max_pool2d", "input")}, attrs);
}

Tensor max_pool2d(const Tensor& x, int64_t kernel_size, std::optional<int64_t> stride,
                  int64_t padding, int64_t dilation) {
  return max_pool2d(x, pair(kernel_size), pair(stride.value_or(kernel_size)), pair(padding),
                    pair(dilation));
}

Tensor avg_pool2d(const Tensor& x, const Ints& kernel_size, const Ints& stride,
                  const Ints& padding, bool count_include_pad) {
  Attrs attrs = pool_attrs(kernel_size, stride, padding, {}, "avg_pool2d");
  attrs.set("count_include_pad", count_include_pad);
  return call1(avg_pool_op, {checked(x, "avg_pool2d", "input")}, attrs);
}

Tensor avg_pool2d(const Tensor& x, int64_t kernel_size, std::optional<int64_t> stride,
                  int64_t padding, bool count_include_pad) {
  return avg_pool2d(x, pair(kernel_size), pair(stride.value_or(kernel_size)), pair(padding),
                    count_include_pad);
}

Tensor max_pool2d_backward(const Tensor& grad_output, const Tensor& x, const Ints& kernel_size,
                           const Ints& stride, const Ints& padding, const Ints& dilation) {
  const char* op = "max_pool2d_backward";
  Attrs attrs = pool_attrs(kernel_size, stride, padding, dilation, op);
  return call1(max_pool_backward_op,
               {checked(grad_output, op, "grad_output"), checked(x, op, "input")}, attrs);
}

Tensor max_pool2d_select(const Tensor& x, const Tensor& source, const Ints& kernel_size,
                         const Ints& stride, const Ints& padding, const Ints& dilation) {
  const char* op = "max_pool2d_select";
  Attrs attrs = pool_attrs(kernel_size, stride, padding, dilation, op);
  return call1(max_pool_select_op, {checked(x, op, "input"), checked(source, op, "source")},
               attrs);
}

Tensor avg_pool2d_backward(const Tensor& grad_output, const Ints& input_hw,
                           const Ints& kernel_size, const Ints& stride, const Ints& padding,
                           bool count_include_pad) {
  const char* op = "avg_pool2d_backward";
  TESSERA_CHECK(input_hw.size() == 2 && input_hw[0] >= 0 && input_hw[1] >= 0, "[", op,
                "] input_hw needs 2 non-negative values (height, width), got ",
                shape_str(input_hw));
  Attrs attrs = pool_attrs(kernel_size, stride, padding, {}, op);
  attrs.set("count_include_pad", count_include_pad).set("input_size", input_hw);
  return call1(avg_pool_backward_op, {checked(grad_output, op, "grad_output")}, attrs);
}

}  // namespace tessera
