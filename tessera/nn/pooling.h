#pragma once

// 2-D pooling modules over [N, C, H, W] (or [C, H, W]) input, as
// torch.nn.MaxPool2d, AvgPool2d and AdaptiveAvgPool2d. They hold no
// parameters, so they share one file pair.

#include <optional>
#include <vector>

#include "tessera/nn/module.h"
#include "tessera/ops/pool.h"

namespace tessera::nn {

// stride defaults to kernel_size.
class MaxPool2d : public Module {
 public:
  explicit MaxPool2d(int64_t kernel_size, std::optional<int64_t> stride = std::nullopt,
                     int64_t padding = 0, int64_t dilation = 1);
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;

 private:
  int64_t kernel_size_, stride_, padding_, dilation_;
};

// stride defaults to kernel_size.
class AvgPool2d : public Module {
 public:
  explicit AvgPool2d(int64_t kernel_size, std::optional<int64_t> stride = std::nullopt,
                     int64_t padding = 0, bool count_include_pad = true);
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;

 private:
  int64_t kernel_size_, stride_, padding_;
  bool count_include_pad_;
};

// Averages over the cells PyTorch assigns to each of the output_size
// positions: rows [floor(i H / out), ceil((i + 1) H / out)), likewise columns.
class AdaptiveAvgPool2d : public Module {
 public:
  explicit AdaptiveAvgPool2d(int64_t output_size)
      : AdaptiveAvgPool2d(std::vector<int64_t>{output_size, output_size}) {}
  explicit AdaptiveAvgPool2d(std::vector<int64_t> output_size);
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;

 private:
  std::vector<int64_t> output_size_;
};

// The function form of AdaptiveAvgPool2d (the op, tessera/ops/pool.h).
using ::tessera::adaptive_avg_pool2d;

}  // namespace tessera::nn
