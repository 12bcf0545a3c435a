#include "tessera/nn/conv2d.h"

#include <cmath>

#include "tessera/nn/init.h"
#include "tessera/ops/conv.h"

namespace tessera::nn {

Conv2d::Conv2d(int64_t in_channels, int64_t out_channels, int64_t kernel_size, int64_t stride,
               int64_t padding, int64_t dilation, int64_t groups, bool bias)
    : Conv2d(in_channels, out_channels, {kernel_size, kernel_size}, {stride, stride},
             {padding, padding}, {dilation, dilation}, groups, bias) {}

Conv2d::Conv2d(int64_t in_channels, int64_t out_channels, std::vector<int64_t> kernel_size,
               std::vector<int64_t> stride, std::vector<int64_t> padding,
               std::vector<int64_t> dilation, int64_t groups, bool bias)
    : Module("Conv2d"),
      in_channels_(in_channels),
      out_channels_(out_channels),
      kernel_size_(std::move(kernel_size)),
      stride_(std::move(stride)),
      padding_(std::move(padding)),
      dilation_(std::move(dilation)),
      groups_(groups) {
  TESSERA_CHECK(kernel_size_.size() == 2 && stride_.size() == 2 && padding_.size() == 2 &&
                    dilation_.size() == 2,
                "[Conv2d] kernel_size, stride, padding and dilation need 2 values each");
  TESSERA_CHECK(in_channels > 0 && out_channels > 0 && groups > 0 && in_channels % groups == 0 &&
                    out_channels % groups == 0,
                "[Conv2d] in_channels (", in_channels, ") and out_channels (", out_channels,
                ") must be positive multiples of groups (", groups, ")");
  TESSERA_CHECK(kernel_size_[0] > 0 && kernel_size_[1] > 0, "[Conv2d] kernel_size must be positive");
  weight = register_parameter(
      "weight", Tensor::empty({out_channels, in_channels / groups, kernel_size_[0], kernel_size_[1]}));
  const double bound =
      1.0 / std::sqrt(static_cast<double>(in_channels / groups * kernel_size_[0] * kernel_size_[1]));
  uniform_(weight, -bound, bound);
  if (bias) {
    this->bias = register_parameter("bias", Tensor::empty({out_channels}));
    uniform_(this->bias, -bound, bound);
  }
}

Conv2d::Conv2d(const Conv2dOptions& options)
    : Conv2d(options.in_channels(), options.out_channels(), options.kernel_size(),
             options.stride(), options.padding(), options.dilation(), options.groups(),
             options.bias()) {
  for (int64_t value : options.output_padding()) {
    TESSERA_CHECK(value == 0, "[Conv2d] output_padding is for ConvTranspose2d; Conv2d takes none");
  }
}

Tensor Conv2d::forward(const Tensor& x) {
  return conv2d(x, weight, bias, stride_, padding_, dilation_, groups_);
}

std::string Conv2d::extra_repr() const {
  auto pair = [](const std::vector<int64_t>& v) { return str_cat("(", v[0], ", ", v[1], ")"); };
  std::string text = str_cat(in_channels_, ", ", out_channels_,
                             ", kernel_size=", pair(kernel_size_), ", stride=", pair(stride_));
  if (padding_[0] != 0 || padding_[1] != 0) text += ", padding=" + pair(padding_);
  if (dilation_[0] != 1 || dilation_[1] != 1) text += ", dilation=" + pair(dilation_);
  if (groups_ != 1) text += str_cat(", groups=", groups_);
  if (!bias.defined()) text += ", bias=false";
  return text;
}

}  // namespace tessera::nn
