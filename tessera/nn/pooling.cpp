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

Tensor adaptive_avg_pool2d(const Tensor& x, const std::vector<int64_t>& output_size) {
  TESSERA_CHECK(x.dim() == 3 || x.dim() == 4, "[adaptive_avg_pool2d] expected [N, C, H, W] or ",
                "[C, H, W] input, got shape ", shape_str(x.shape()));
  TESSERA_CHECK(output_size.size() == 2 && output_size[0] > 0 && output_size[1] > 0,
                "[adaptive_avg_pool2d] output_size needs 2 positive values");
  const int64_t height = x.size(-2), width = x.size(-1);
  const int64_t out_h = output_size[0], out_w = output_size[1];
  TESSERA_CHECK(height > 0 && width > 0, "[adaptive_avg_pool2d] input has an empty spatial dim: ",
                shape_str(x.shape()));
  // Windows tile the input exactly: one pooling op does it.
  if (height % out_h == 0 && width % out_w == 0) {
    const int64_t kh = height / out_h, kw = width / out_w;
    return avg_pool2d(x, {kh, kw}, {kh, kw});
  }
  const int64_t h_dim = x.dim() - 2, w_dim = x.dim() - 1;
  std::vector<Tensor> rows;
  for (int64_t i = 0; i < out_h; ++i) {
    const int64_t h0 = i * height / out_h, h1 = ((i + 1) * height + out_h - 1) / out_h;
    std::vector<Tensor> cells;
    for (int64_t j = 0; j < out_w; ++j) {
      const int64_t w0 = j * width / out_w, w1 = ((j + 1) * width + out_w - 1) / out_w;
      cells.push_back(mean(x.slice(h_dim, h0, h1).slice(w_dim, w0, w1), {h_dim, w_dim}, true));
    }
    rows.push_back(cat(cells, w_dim));
  }
  return cat(rows, h_dim);
}

}  // namespace tessera::nn
