#include "tessera/nn/conv_transpose2d.h"

#include <cmath>

#include "tessera/nn/init.h"
#include "tessera/ops/conv.h"

namespace tessera::nn {

ConvTranspose2d::ConvTranspose2d(int64_t in_channels, int64_t out_channels, int64_t kernel_size,
                                 int64_t stride, int64_t padding, int64_t output_padding,
                                 int64_t groups, bool bias, int64_t dilation)
    : ConvTranspose2d(ConvTranspose2dOptions(in_channels, out_channels, kernel_size)
                          .stride(stride)
                          .padding(padding)
                          .output_padding(output_padding)
                          .groups(groups)
                          .bias(bias)
                          .dilation(dilation)) {}

ConvTranspose2d::ConvTranspose2d(const ConvTranspose2dOptions& options)
    : Module("ConvTranspose2d"), options_(options) {
  const int64_t in_channels = options.in_channels(), out_channels = options.out_channels();
  const int64_t groups = options.groups();
  TESSERA_CHECK(options.kernel_size().size() == 2 && options.stride().size() == 2 &&
                    options.padding().size() == 2 && options.output_padding().size() == 2 &&
                    options.dilation().size() == 2,
                "[ConvTranspose2d] kernel_size, stride, padding, output_padding and dilation "
                "need 2 values each");
  TESSERA_CHECK(in_channels > 0 && out_channels > 0 && groups > 0 && in_channels % groups == 0 &&
                    out_channels % groups == 0,
                "[ConvTranspose2d] in_channels (", in_channels, ") and out_channels (",
                out_channels, ") must be positive multiples of groups (", groups, ")");
  const std::vector<int64_t>& k = options.kernel_size();
  TESSERA_CHECK(k[0] > 0 && k[1] > 0, "[ConvTranspose2d] kernel_size must be positive, got (",
                k[0], ", ", k[1], ")");
  weight = register_parameter("weight",
                              Tensor::empty({in_channels, out_channels / groups, k[0], k[1]}));
  const double bound = 1.0 / std::sqrt(static_cast<double>(out_channels / groups * k[0] * k[1]));
  uniform_(weight, -bound, bound);
  if (options.bias()) {
    this->bias = register_parameter("bias", Tensor::empty({out_channels}));
    uniform_(this->bias, -bound, bound);
  }
}

Tensor ConvTranspose2d::forward(const Tensor& x) {
  return conv_transpose2d(x, weight, bias, options_.stride(), options_.padding(),
                          options_.output_padding(), options_.groups(), options_.dilation());
}

std::string ConvTranspose2d::extra_repr() const {
  auto pair = [](const std::vector<int64_t>& v) { return str_cat("(", v[0], ", ", v[1], ")"); };
  const ConvTranspose2dOptions& o = options_;
  std::string text = str_cat(o.in_channels(), ", ", o.out_channels(),
                             ", kernel_size=", pair(o.kernel_size()), ", stride=", pair(o.stride()));
  auto any = [](const std::vector<int64_t>& v, int64_t value) {
    return v[0] != value || v[1] != value;
  };
  if (any(o.padding(), 0)) text += ", padding=" + pair(o.padding());
  if (any(o.output_padding(), 0)) text += ", output_padding=" + pair(o.output_padding());
  if (any(o.dilation(), 1)) text += ", dilation=" + pair(o.dilation());
  if (o.groups() != 1) text += str_cat(", groups=", o.groups());
  if (!bias.defined()) text += ", bias=false";
  return text;
}

}  // namespace tessera::nn
