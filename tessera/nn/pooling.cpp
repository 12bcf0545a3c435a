#include "tessera/nn/pooling.h"

#include "tessera/ops/concat.h"
#include "tessera/ops/pool.h"
#include "tessera/ops/reduce.h"

namespace tessera::nn {

MaxPool2d::MaxPool2d(int64_t kernel_size, std::optional<int64_t> stride, int64_t padding,
                     int64_t dilation)
    : Module("MaxPool2d"),
      kernel_size_(kernel_size),
      stride_(stride.value_or(kernel_size)),
      padding_(padding),
      dilation_(dilation) {
  TESSERA_CHECK(kernel_size > 0 && stride_ > 0 && padding >= 0 && dilation > 0,
                "[MaxPool2d] needs kernel_size, stride, dilation > 0 and padding >= 0, got "
                "kernel_size=", kernel_size, ", stride=", stride_, ", padding=", padding,
                ", dilation=", dilation);
}

Tensor MaxPool2d::forward(const Tensor& x) {
  return max_pool2d(x, kernel_size_, stride_, padding_, dilation_);
}

std::string MaxPool2d::extra_repr() const {
  return str_cat("kernel_size=", kernel_size_, ", stride=", stride_, ", padding=", padding_,
                 ", dilation=", dilation_);
}

AvgPool2d::AvgPool2d(int64_t kernel_size, std::optional<int64_t> stride, int64_t padding,
                     bool count_include_pad)
    : Module("AvgPool2d"),
      kernel_size_(kernel_size),
      stride_(stride.value_or(kernel_size)),
      padding_(padding),
      count_include_pad_(count_include_pad) {
  TESSERA_CHECK(kernel_size > 0 && stride_ > 0 && padding >= 0,
                "[AvgPool2d] needs kernel_size, stride > 0 and padding >= 0, got kernel_size=",
                kernel_size, ", stride=", stride_, ", padding=", padding);
}

Tensor AvgPool2d::forward(const Tensor& x) {
  return avg_pool2d(x, kernel_size_, stride_, padding_, count_include_pad_);
}

std::string AvgPool2d::extra_repr() const {
  return str_cat("kernel_size=", kernel_size_, ", stride=", stride_, ", padding=", padding_);
}

AdaptiveAvgPool2d::AdaptiveAvgPool2d(std::vector<int64_t> output_size)
    : Module("AdaptiveAvgPool2d"), output_size_(std::move(output_size)) {
  TESSERA_CHECK(output_size_.size() == 2 && output_size_[0] > 0 && output_size_[1] > 0,
                "[AdaptiveAvgPool2d] output_size needs 2 positive values");
}

Tensor AdaptiveAvgPool2d::forward(const Tensor& x) { return adaptive_avg_pool2d(x, output_size_); }

std::string AdaptiveAvgPool2d::extra_repr() const {
  return str_cat("output_size=(", output_size_[0], ", ", output_size_[1], ")");
}

}  // namespace tessera::nn
