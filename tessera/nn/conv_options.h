#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace tessera::nn {

// Constructor arguments of a D-dimensional convolution layer, set by name as
// torch::nn::Conv2dOptions: only in_channels, out_channels and kernel_size
// are required, and the rest keep PyTorch's defaults unless set.
//
//   nn::Conv2d conv(nn::Conv2dOptions(3, 64, 3).stride(2).padding(1).bias(false));
//
// A single number stands for every spatial dim. output_padding is for the
// transposed layers (ConvTranspose2d); the others refuse a non-zero one.
template <std::size_t D>
class ConvOptions {
 public:
  ConvOptions(int64_t in_channels, int64_t out_channels, int64_t kernel_size)
      : ConvOptions(in_channels, out_channels, std::vector<int64_t>(D, kernel_size)) {}
  ConvOptions(int64_t in_channels, int64_t out_channels, std::vector<int64_t> kernel_size)
      : in_channels_(in_channels),
        out_channels_(out_channels),
        kernel_size_(std::move(kernel_size)) {}

  ConvOptions& stride(int64_t value) { return stride(std::vector<int64_t>(D, value)); }
  ConvOptions& stride(std::vector<int64_t> value) { return set(stride_, std::move(value)); }
  ConvOptions& padding(int64_t value) { return padding(std::vector<int64_t>(D, value)); }
  ConvOptions& padding(std::vector<int64_t> value) { return set(padding_, std::move(value)); }
  ConvOptions& output_padding(int64_t value) {
    return output_padding(std::vector<int64_t>(D, value));
  }
  ConvOptions& output_padding(std::vector<int64_t> value) {
    return set(output_padding_, std::move(value));
  }
  ConvOptions& dilation(int64_t value) { return dilation(std::vector<int64_t>(D, value)); }
  ConvOptions& dilation(std::vector<int64_t> value) { return set(dilation_, std::move(value)); }
  ConvOptions& groups(int64_t value) {
    groups_ = value;
    return *this;
  }
  ConvOptions& bias(bool value) {
    bias_ = value;
    return *this;
  }

  int64_t in_channels() const { return in_channels_; }
  int64_t out_channels() const { return out_channels_; }
  const std::vector<int64_t>& kernel_size() const { return kernel_size_; }
  const std::vector<int64_t>& stride() const { return stride_; }
  const std::vector<int64_t>& padding() const { return padding_; }
  const std::vector<int64_t>& output_padding() const { return output_padding_; }
  const std::vector<int64_t>& dilation() const { return dilation_; }
  int64_t groups() const { return groups_; }
  bool bias() const { return bias_; }

 private:
  ConvOptions& set(std::vector<int64_t>& field, std::vector<int64_t> value) {
    field = std::move(value);
    return *this;
  }

  int64_t in_channels_;
  int64_t out_channels_;
  std::vector<int64_t> kernel_size_;
  std::vector<int64_t> stride_ = std::vector<int64_t>(D, 1);
  std::vector<int64_t> padding_ = std::vector<int64_t>(D, 0);
  std::vector<int64_t> output_padding_ = std::vector<int64_t>(D, 0);
  std::vector<int64_t> dilation_ = std::vector<int64_t>(D, 1);
  int64_t groups_ = 1;
  bool bias_ = true;
};

using Conv1dOptions = ConvOptions<1>;
using Conv2dOptions = ConvOptions<2>;
using ConvTranspose2dOptions = ConvOptions<2>;

}  // namespace tessera::nn
