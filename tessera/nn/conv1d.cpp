#include "tessera/nn/conv1d.h"

#include <cmath>

#include "tessera/nn/init.h"
#include "tessera/ops/conv.h"

namespace tessera::nn {

Conv1d::Conv1d(int64_t in_channels, int64_t out_channels, int64_t kernel_size, int64_t stride,
               int64_t padding, int64_t dilation, int64_t groups, bool bias)
    : Module("Conv1d"),
      in_channels_(in_channels),
      out_channels_(out_channels),
      kernel_size_(kernel_size),
      stride_(stride),
      padding_(padding),
      dilation_(dilation),
      groups_(groups) {
  TESSERA_CHECK(in_channels > 0 && out_channels > 0 && groups > 0 && in_channels % groups == 0 &&
                    out_channels % groups == 0,
                "[Conv1d] in_channels (", in_channels, ") and out_channels (", out_channels,
                ") must be positive multiples of groups (", groups, ")");
  TESSERA_CHECK(kernel_size > 0 && stride > 0 && padding >= 0 && dilation > 0,
                "[Conv1d] needs kernel_size, stride and dilation positive and padding "
                "non-negative, got kernel_size=",
                kernel_size, ", stride=", stride, ", padding=", padding, ", dilation=", dilation);
  weight = register_parameter("weight",
                              Tensor::empty({out_channels, in_channels / groups, kernel_size}));
  const double bound = 1.0 / std::sqrt(static_cast<double>(in_channels / groups * kernel_size));
  uniform_(weight, -bound, bound);
  if (bias) {
    this->bias = register_parameter("bias", Tensor::empty({out_channels}));
    uniform_(this->bias, -bound, bound);
  }
}

namespace {

int64_t single(const std::vector<int64_t>& values, const char* name) {
  TESSERA_CHECK(values.size() == 1, "[Conv1d] ", name, " needs 1 value, got ", values.size());
  return values[0];
}

}  // namespace

Conv1d::Conv1d(const Conv1dOptions& options)
    : Conv1d(options.in_channels(), options.out_channels(),
             single(options.kernel_size(), "kernel_size"), single(options.stride(), "stride"),
             single(options.padding(), "padding"), single(options.dilation(), "dilation"),
             options.groups(), options.bias()) {
  TESSERA_CHECK(options.output_padding() == std::vector<int64_t>{0},
                "[Conv1d] output_padding is for transposed convolutions; Conv1d takes none");
}

Tensor Conv1d::forward(const Tensor& x) {
  return conv1d(x, weight, bias, stride_, padding_, dilation_, groups_);
}

std::string Conv1d::extra_repr() const {
  std::string text = str_cat(in_channels_, ", ", out_channels_, ", kernel_size=(", kernel_size_,
                             ",), stride=(", stride_, ",)");
  if (padding_ != 0) text += str_cat(", padding=(", padding_, ",)");
  if (dilation_ != 1) text += str_cat(", dilation=(", dilation_, ",)");
  if (groups_ != 1) text += str_cat(", groups=", groups_);
  if (!bias.defined()) text += ", bias=false";
  return text;
}

}  // namespace tessera::nn
