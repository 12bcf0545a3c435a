#pragma once

// Softmax and LogSoftmax over one dim as modules (torch.nn.Softmax,
// torch.nn.LogSoftmax). PyTorch's implicit dim (dim=None) is deprecated
// there, so here the dim is always given.

#include "tessera/nn/module.h"

namespace tessera::nn {

class Softmax : public Module {
 public:
  explicit Softmax(int64_t dim) : Module("Softmax"), dim_(dim) {}
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override { return str_cat("dim=", dim_); }

 private:
  int64_t dim_;
};

class LogSoftmax : public Module {
 public:
  explicit LogSoftmax(int64_t dim) : Module("LogSoftmax"), dim_(dim) {}
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override { return str_cat("dim=", dim_); }

 private:
  int64_t dim_;
};

}  // namespace tessera::nn
