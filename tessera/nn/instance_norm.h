#pragma once

#include <optional>

#include "tessera/nn/module.h"

namespace tessera::nn {

// Instance normalisation, as torch.nn.InstanceNorm{1,2,3}d: each (sample,
// channel) is normalised over its own values. Without affine (PyTorch's
// default) there are no parameters; with track_running_stats, running_mean
// and running_var are kept (the batch average of the per-instance
// statistics) and used in eval. Unbatched input ([C, *]) is accepted.
class InstanceNorm : public Module {
 public:
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;

  Tensor weight;  // undefined without affine
  Tensor bias;    // undefined without affine
  Tensor running_mean;
  Tensor running_var;
  Tensor num_batches_tracked;

 protected:
  InstanceNorm(std::string type_name, int64_t spatial_dims, int64_t num_features, double eps,
               std::optional<double> momentum, bool affine, bool track_running_stats);

 private:
  int64_t spatial_dims_;
  int64_t num_features_;
  double eps_;
  std::optional<double> momentum_;
};

class InstanceNorm1d : public InstanceNorm {
 public:
  explicit InstanceNorm1d(int64_t num_features, double eps = 1e-5,
                          std::optional<double> momentum = 0.1, bool affine = false,
                          bool track_running_stats = false)
      : InstanceNorm("InstanceNorm1d", 1, num_features, eps, momentum, affine,
                     track_running_stats) {}
};

class InstanceNorm2d : public InstanceNorm {
 public:
  explicit InstanceNorm2d(int64_t num_features, double eps = 1e-5,
                          std::optional<double> momentum = 0.1, bool affine = false,
                          bool track_running_stats = false)
      : InstanceNorm("InstanceNorm2d", 2, num_features, eps, momentum, affine,
                     track_running_stats) {}
};

class InstanceNorm3d : public InstanceNorm {
 public:
  explicit InstanceNorm3d(int64_t num_features, double eps = 1e-5,
                          std::optional<double> momentum = 0.1, bool affine = false,
                          bool track_running_stats = false)
      : InstanceNorm("InstanceNorm3d", 3, num_features, eps, momentum, affine,
                     track_running_stats) {}
};

}  // namespace tessera::nn
