#pragma once

#include <vector>

#include "tessera/nn/module.h"

namespace tessera::nn {

// Flattens dims start_dim..end_dim into one (default: all but the batch
// dim), as torch.nn.Flatten.
class Flatten : public Module {
 public:
  explicit Flatten(int64_t start_dim = 1, int64_t end_dim = -1)
      : Module("Flatten"), start_dim_(start_dim), end_dim_(end_dim) {}
  Tensor forward(const Tensor& x) override { return x.flatten(start_dim_, end_dim_); }
  std::string extra_repr() const override {
    return str_cat("start_dim=", start_dim_, ", end_dim=", end_dim_);
  }

 private:
  int64_t start_dim_;
  int64_t end_dim_;
};

// Splits dim into the dims `sizes` (one of them may be -1, inferred), as
// torch.nn.Unflatten: the inverse of Flatten. [N, 12] -> [N, 3, 4] with
// Unflatten(1, {3, 4}).
class Unflatten : public Module {
 public:
  Unflatten(int64_t dim, std::vector<int64_t> sizes);
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;

 private:
  int64_t dim_;
  std::vector<int64_t> sizes_;
};

}  // namespace tessera::nn
