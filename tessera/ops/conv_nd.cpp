// Convolutions composed of the conv2d ops (ops/conv.cpp): string padding,
// 1-D convolution (conv2d over a height of one), 3-D convolution (a sum over
// the kernel's depth of conv2d on depth slices, batched over the output
// depth) and transposed convolution (conv2d_backward_input). Their
// gradients and SBP signatures are those of the ops they are made of.

#include <algorithm>
#include <string>

#include "tessera/ops/conv.h"
#include "tessera/ops/elementwise.h"
#include "tessera/ops/op.h"
#include "tessera/ops/pad.h"

namespace tessera {

namespace {

using Ints = std::vector<int64_t>;

void check_defined(const Tensor& x, const Tensor& weight, const char* op) {
  TESSERA_CHECK(x.defined() && weight.defined(), "[", op, "] got an undefined tensor");
}

// One value per spatial dim: a single value is repeated, as PyTorch does.
Ints per_dim(const Ints& values, size_t dims, const char* op, const char* name) {
  if (values.size() == 1) return Ints(dims, values[0]);
  TESSERA_CHECK(values.size() == dims, "[", op, "] ", name, " needs ", dims, " values, got ",
                values.size(), " (", shape_str(values), ")");
  return values;
}

// Resolves "same"/"valid" for a kernel of spatial size `kernel`: the
// symmetric padding to pass on, and the F.pad list (last dim first) that
// adds the odd element after each dim, or an empty list when none.
struct StringPadding {
  Ints symmetric, extra;
};

StringPadding resolve(const ConvPadding& padding, const Ints& kernel, const Ints& stride,
                      const Ints& dilation, const char* op) {
  const size_t dims = kernel.size();
  StringPadding out{Ints(dims, 0), {}};
  if (padding.mode == "valid") return out;
  TESSERA_CHECK(padding.mode == "same", "[", op, "] padding \"", padding.mode,
                "\" is unknown; use \"same\", \"valid\" or numbers");
  for (int64_t s : stride) {
    TESSERA_CHECK(s == 1, "[", op, "] padding=\"same\" needs stride 1, got stride ",
                  shape_str(stride), " (PyTorch does not support strided \"same\" either)");
  }
  Ints pads(2 * dims, 0);
  bool odd = false;
  for (size_t d = 0; d < dims; ++d) {
    const int64_t total = checked_mul(dilation[d], kernel[d] - 1, op);
    out.symmetric[d] = total / 2;
    pads[2 * (dims - 1 - d) + 1] = total % 2;
    odd = odd || total % 2 != 0;
  }
  if (odd) out.extra = pads;
  return out;
}

Ints spatial_kernel(const Tensor& weight, size_t dims, const char* op) {
  TESSERA_CHECK(weight.dim() == static_cast<int64_t>(dims) + 2, "[", op, "] weight must be ",
                dims + 2, "-D [O, C/groups, kernel...], got ", shape_str(weight.shape()));
  return Ints(weight.shape().end() - static_cast<int64_t>(dims), weight.shape().end());
}

void check_input(const Tensor& x, size_t dims, const char* op) {
  TESSERA_CHECK(x.dim() == static_cast<int64_t>(dims) + 1 || x.dim() == static_cast<int64_t>(dims) + 2,
                "[", op, "] input must be ", dims + 1, "-D (unbatched) or ", dims + 2,
                "-D (batched), got ", shape_str(x.shape()));
}

Tensor pad_extra(const Tensor& x, const Ints& extra) {
  return extra.empty() ? x : pad(x, extra);
}

Tensor conv3d_impl(const Tensor& x, const Tensor& weight, const Tensor& bias, const Ints& stride,
                   const Ints& padding, const Ints& dilation, int64_t groups) {
  const char* op = "conv3d";
  check_input(x, 3, op);
  spatial_kernel(weight, 3, op);
  if (x.dim() == 4) {
    return conv3d_impl(x.unsqueeze(0), weight, bias, stride, padding, dilation, groups).squeeze(0);
  }
  for (int d = 0; d < 3; ++d) {
    TESSERA_CHECK(stride[d] >= 1 && dilation[d] >= 1 && padding[d] >= 0, "[", op,
                  "] needs stride >= 1, dilation >= 1 and padding >= 0, got stride ",
                  shape_str(stride), ", padding ", shape_str(padding), ", dilation ",
                  shape_str(dilation));
  }
  TESSERA_CHECK(groups >= 1, "[", op, "] groups must be positive, got ", groups);
  const Shape& xs = x.shape();
  const Shape& ws = weight.shape();
  TESSERA_CHECK(xs[1] == checked_mul(ws[1], groups, op), "[", op, "] input has ", xs[1],
                " channels (shape ", shape_str(xs), ") but weight ", shape_str(ws),
                " with groups=", groups, " expects ", ws[1] * groups,
                " (weight.shape[1] * groups)");
  TESSERA_CHECK(ws[0] >= 1 && ws[0] % groups == 0, "[", op, "] weight has ", ws[0],
                " output channels (shape ", shape_str(ws), "); need a positive multiple of groups=",
                groups);
  const int64_t depth = window_output_size(xs[2], ws[2], stride[0], padding[0], dilation[0], op);
  const int64_t oh = window_output_size(xs[3], ws[3], stride[1], padding[1], dilation[1], op);
  const int64_t ow = window_output_size(xs[4], ws[4], stride[2], padding[2], dilation[2], op);
  TESSERA_CHECK(depth >= 1 && oh >= 1 && ow >= 1, "[", op, "] kernel ",
                shape_str({ws[2], ws[3], ws[4]}), " with dilation ", shape_str(dilation),
                " does not fit the padded input: input ", shape_str(xs), ", padding ",
                shape_str(padding));
  const Tensor padded = padding[0] > 0 ? pad(x, {0, 0, 0, 0, padding[0], padding[0]}) : x;
  const int64_t n = xs[0], c = xs[1];
  const Ints plane_stride = {stride[1], stride[2]}, plane_padding = {padding[1], padding[2]},
             plane_dilation = {dilation[1], dilation[2]};
  Tensor total;
  for (int64_t kz = 0; kz < ws[2]; ++kz) {
    // The input slices that kernel depth kz meets, one per output depth,
    // batched with the images: [N * depth, C, H, W].
    const int64_t first = kz * dilation[0];
    Tensor slices = padded.slice(2, first, first + (depth - 1) * stride[0] + 1, stride[0])
                        .permute({0, 2, 1, 3, 4})
                        .reshape({n * depth, c, xs[3], xs[4]});
    Tensor term = conv2d(slices, weight.select(2, kz), {}, plane_stride, plane_padding,
                         plane_dilation, groups);
    total = total.defined() ? add(total, term) : term;
  }
  Tensor out = total.reshape({n, depth, ws[0], oh, ow}).permute({0, 2, 1, 3, 4});
  if (bias.defined()) {
    TESSERA_CHECK(bias.shape() == Shape{ws[0]}, "[", op, "] bias must have shape [", ws[0],
                  "] (one value per output channel), got ", shape_str(bias.shape()));
    out = add(out, bias.reshape({1, ws[0], 1, 1, 1}));
  }
  return out.contiguous();
}

}  // namespace

Tensor conv2d(const Tensor& x, const Tensor& weight, const Tensor& bias, const Ints& stride,
              const ConvPadding& padding, const Ints& dilation, int64_t groups) {
  const char* op = "conv2d";
  check_defined(x, weight, op);
  check_input(x, 2, op);
  Ints kernel = spatial_kernel(weight, 2, op);
  Ints strides = per_dim(stride, 2, op, "stride"), dilations = per_dim(dilation, 2, op, "dilation");
  StringPadding p = resolve(padding, kernel, strides, dilations, op);
  return conv2d(pad_extra(x, p.extra), weight, bias, strides, p.symmetric, dilations, groups);
}

Tensor conv2d(const Tensor& x, const Tensor& weight, const Tensor& bias, int64_t stride,
              const ConvPadding& padding, int64_t dilation, int64_t groups) {
  return conv2d(x, weight, bias, Ints{stride, stride}, padding, Ints{dilation, dilation}, groups);
}

Tensor conv1d(const Tensor& x, const Tensor& weight, const Tensor& bias, const Ints& stride,
              const Ints& padding, const Ints& dilation, int64_t groups) {
  const char* op = "conv1d";
  check_defined(x, weight, op);
  check_input(x, 1, op);
  spatial_kernel(weight, 1, op);
  Ints s = per_dim(stride, 1, op, "stride"), p = per_dim(padding, 1, op, "padding"),
       d = per_dim(dilation, 1, op, "dilation");
  return conv2d(x.unsqueeze(-2), weight.unsqueeze(-2), bias, {1, s[0]}, {0, p[0]}, {1, d[0]},
                groups)
      .squeeze(-2);
}

Tensor conv1d(const Tensor& x, const Tensor& weight, const Tensor& bias, int64_t stride,
              int64_t padding, int64_t dilation, int64_t groups) {
  return conv1d(x, weight, bias, Ints{stride}, Ints{padding}, Ints{dilation}, groups);
}

Tensor conv1d(const Tensor& x, const Tensor& weight, const Tensor& bias, const Ints& stride,
              const ConvPadding& padding, const Ints& dilation, int64_t groups) {
  const char* op = "conv1d";
  check_defined(x, weight, op);
  check_input(x, 1, op);
  Ints kernel = spatial_kernel(weight, 1, op);
  Ints s = per_dim(stride, 1, op, "stride"), d = per_dim(dilation, 1, op, "dilation");
  StringPadding p = resolve(padding, kernel, s, d, op);
  return conv1d(pad_extra(x, p.extra), weight, bias, s, p.symmetric, d, groups);
}

Tensor conv1d(const Tensor& x, const Tensor& weight, const Tensor& bias, int64_t stride,
              const ConvPadding& padding, int64_t dilation, int64_t groups) {
  return conv1d(x, weight, bias, Ints{stride}, padding, Ints{dilation}, groups);
}

Tensor conv3d(const Tensor& x, const Tensor& weight, const Tensor& bias, const Ints& stride,
              const Ints& padding, const Ints& dilation, int64_t groups) {
  const char* op = "conv3d";
  check_defined(x, weight, op);
  return conv3d_impl(x, weight, bias, per_dim(stride, 3, op, "stride"),
                     per_dim(padding, 3, op, "padding"), per_dim(dilation, 3, op, "dilation"),
                     groups);
}

Tensor conv3d(const Tensor& x, const Tensor& weight, const Tensor& bias, int64_t stride,
              int64_t padding, int64_t dilation, int64_t groups) {
  return conv3d(x, weight, bias, Ints{stride}, Ints{padding}, Ints{dilation}, groups);
}

Tensor conv3d(const Tensor& x, const Tensor& weight, const Tensor& bias, const Ints& stride,
              const ConvPadding& padding, const Ints& dilation, int64_t groups) {
  const char* op = "conv3d";
  check_defined(x, weight, op);
  check_input(x, 3, op);
  Ints kernel = spatial_kernel(weight, 3, op);
  Ints s = per_dim(stride, 3, op, "stride"), d = per_dim(dilation, 3, op, "dilation");
  StringPadding p = resolve(padding, kernel, s, d, op);
  return conv3d_impl(pad_extra(x, p.extra), weight, bias, s, p.symmetric, d, groups);
}

Tensor conv3d(const Tensor& x, const Tensor& weight, const Tensor& bias, int64_t stride,
              const ConvPadding& padding, int64_t dilation, int64_t groups) {
  return conv3d(x, weight, bias, Ints{stride}, padding, Ints{dilation}, groups);
}

Tensor conv_transpose2d(const Tensor& x, const Tensor& weight, const Tensor& bias,
                        const Ints& stride_in, const Ints& padding_in,
                        const Ints& output_padding_in, int64_t groups, const Ints& dilation_in) {
  const char* op = "conv_transpose2d";
  check_defined(x, weight, op);
  check_input(x, 2, op);
  spatial_kernel(weight, 2, op);
  if (x.dim() == 3) {
    return conv_transpose2d(x.unsqueeze(0), weight, bias, stride_in, padding_in,
                            output_padding_in, groups, dilation_in)
        .squeeze(0);
  }
  const Ints stride = per_dim(stride_in, 2, op, "stride");
  const Ints padding = per_dim(padding_in, 2, op, "padding");
  const Ints output_padding = per_dim(output_padding_in, 2, op, "output_padding");
  const Ints dilation = per_dim(dilation_in, 2, op, "dilation");
  TESSERA_CHECK(groups >= 1, "[", op, "] groups must be positive, got ", groups);
  const Shape& xs = x.shape();
  const Shape& ws = weight.shape();
  TESSERA_CHECK(xs[1] == ws[0], "[", op, "] input has ", xs[1], " channels (shape ",
                shape_str(xs), ") but weight ", shape_str(ws),
                " expects weight.shape[0] = ", ws[0], " (weight is [C_in, C_out/groups, kh, kw])");
  TESSERA_CHECK(ws[0] % groups == 0, "[", op, "] weight has ", ws[0],
                " input channels, not divisible by groups=", groups);
  Ints size(2);
  bool wide_output_padding = false;
  for (int d = 0; d < 2; ++d) {
    TESSERA_CHECK(stride[d] >= 1 && dilation[d] >= 1 && padding[d] >= 0 &&
                      output_padding[d] >= 0,
                  "[", op, "] needs stride >= 1, dilation >= 1, padding >= 0 and ",
                  "output_padding >= 0, got stride ", shape_str(stride), ", padding ",
                  shape_str(padding), ", output_padding ", shape_str(output_padding),
                  ", dilation ", shape_str(dilation));
    TESSERA_CHECK(output_padding[d] < stride[d] || output_padding[d] < dilation[d], "[", op,
                  "] output_padding ", shape_str(output_padding),
                  " must be smaller than either the stride ", shape_str(stride),
                  " or the dilation ", shape_str(dilation));
    const int64_t length = checked_add(
        checked_add(checked_mul(xs[2 + d] - 1, stride[d], op), -2 * padding[d], op),
        checked_add(checked_mul(dilation[d], ws[2 + d] - 1, op), output_padding[d] + 1, op), op);
    TESSERA_CHECK(length >= 1, "[", op, "] input ", shape_str(xs), " with weight ", shape_str(ws),
                  ", stride ", shape_str(stride), ", padding ", shape_str(padding),
                  " and dilation ", shape_str(dilation), " gives an empty output (size ",
                  length, ")");
    size[d] = length;
    wide_output_padding = wide_output_padding || output_padding[d] >= stride[d];
  }
  DType common = promote_types(x.dtype(), weight.dtype());
  if (bias.defined()) common = promote_types(common, bias.dtype());
  TESSERA_CHECK(common != DType::boolean, "[", op, "] does not take bool tensors");
  if (!is_floating(common)) {
    // PyTorch convolves integer tensors too (no gradient). Summed in f64:
    // exact while the sums stay below 2^53 in magnitude (PyTorch wraps at 2^63).
    const Tensor bias64 = bias.defined() ? bias.to(DType::f64) : bias;
    return conv_transpose2d(x.to(DType::f64), weight.to(DType::f64), bias64, stride, padding,
                            output_padding, groups, dilation)
        .to(common);
  }
  Tensor out;
  if (!wide_output_padding) {
    // The gradient of a conv2d whose input had this size.
    out = conv2d_backward_input(x.to(common), weight.to(common), size, stride, padding, dilation,
                                groups);
  } else {
    // output_padding of a stride or more has no conv2d of that input size.
    // Scatter into the whole unpadded extent, then crop `padding` from the
    // front and keep `size` (zeros past the extent's end).
    Ints full(2);
    for (int d = 0; d < 2; ++d) {
      full[d] = (xs[2 + d] - 1) * stride[d] + dilation[d] * (ws[2 + d] - 1) + 1;
    }
    out = conv2d_backward_input(x.to(common), weight.to(common), full, stride, {0, 0}, dilation,
                                groups);
    for (int d = 0; d < 2; ++d) {
      const int64_t end = std::min(full[d], padding[d] + size[d]);
      out = out.slice(2 + d, padding[d], end);
      if (end - padding[d] < size[d]) {
        Ints pads = {0, 0, 0, 0};
        pads[d == 0 ? 3 : 1] = size[d] - (end - padding[d]);
        out = pad(out, pads);
      }
    }
  }
  if (bias.defined()) {
    const int64_t channels = ws[1] * groups;
    TESSERA_CHECK(bias.shape() == Shape{channels}, "[", op, "] bias must have shape [", channels,
                  "] (one value per output channel), got ", shape_str(bias.shape()));
    out = add(out, bias.to(common).reshape({1, channels, 1, 1}));
  }
  return out;
}

Tensor conv_transpose2d(const Tensor& x, const Tensor& weight, const Tensor& bias, int64_t stride,
                        int64_t padding, int64_t output_padding, int64_t groups,
                        int64_t dilation) {
  return conv_transpose2d(x, weight, bias, Ints{stride}, Ints{padding}, Ints{output_padding},
                          groups, Ints{dilation});
}

Tensor conv_transpose1d(const Tensor& x, const Tensor& weight, const Tensor& bias, int64_t stride,
                        int64_t padding, int64_t output_padding, int64_t groups,
                        int64_t dilation) {
  const char* op = "conv_transpose1d";
  check_defined(x, weight, op);
  check_input(x, 1, op);
  spatial_kernel(weight, 1, op);
  return conv_transpose2d(x.unsqueeze(-2), weight.unsqueeze(-2), bias, {1, stride}, {0, padding},
                          {0, output_padding}, groups, {1, dilation})
      .squeeze(-2);
}

}  // namespace tessera
