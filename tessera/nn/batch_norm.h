#pragma once

#include <optional>

#include "tessera/nn/module.h"

namespace tessera::nn {

// Batch normalisation over every dim but the channel dim (1), as
// torch.nn.BatchNorm{1,2,3}d (functional batch_norm). In training it
// normalises with the batch's statistics and updates running_mean /
// running_var (unbiased) with `momentum`, or with the cumulative average
// when momentum is nullopt (PyTorch's None); in eval it uses the running
// statistics. BatchNorm1d takes [N, C] or [N, C, L]; BatchNorm2d takes
// [N, C, H, W]; BatchNorm3d takes [N, C, D, H, W].
class BatchNorm : public Module {
 public:
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;

  Tensor weight;  // ones; undefined without affine
  Tensor bias;    // zeros; undefined without affine
  Tensor running_mean;
  Tensor running_var;
  Tensor num_batches_tracked;

 protected:
  BatchNorm(std::string type_name, std::vector<int64_t> valid_dims, int64_t num_features,
            double eps, std::optional<double> momentum, bool affine, bool track_running_stats);

 private:
  std::vector<int64_t> valid_dims_;
  int64_t num_features_;
  double eps_;
  std::optional<double> momentum_;
};

class BatchNorm1d : public BatchNorm {
 public:
  explicit BatchNorm1d(int64_t num_features, double eps = 1e-5, std::optional<double> momentum = 0.1,
                       bool affine = true, bool track_running_stats = true)
      : BatchNorm("BatchNorm1d", {2, 3}, num_features, eps, momentum, affine,
                  track_running_stats) {}
};

class BatchNorm2d : public BatchNorm {
 public:
  explicit BatchNorm2d(int64_t num_features, double eps = 1e-5, std::optional<double> momentum = 0.1,
                       bool affine = true, bool track_running_stats = true)
      : BatchNorm("BatchNorm2d", {4}, num_features, eps, momentum, affine, track_running_stats) {}
};

class BatchNorm3d : public BatchNorm {
 public:
  explicit BatchNorm3d(int64_t num_features, double eps = 1e-5, std::optional<double> momentum = 0.1,
                       bool affine = true, bool track_running_stats = true)
      : BatchNorm("BatchNorm3d", {5}, num_features, eps, momentum, affine, track_running_stats) {}
};

}  // namespace tessera::nn
