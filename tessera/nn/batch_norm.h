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
//
// On a global input split over the batch the statistics are global by
// default: those of the whole logical batch, as one process computes them
// (PyTorch's SyncBatchNorm), at one all-reduce of 2C values per layer in the
// forward and one in the backward. set_per_rank_statistics() switches to
// what DDP does: each rank normalises with its own shard's statistics and
// updates its own copy of the running statistics (rank 0's copy is the
// logical value, as DDP's broadcast_buffers); weight and bias gradients are
// still summed over the ranks.
class BatchNorm : public Module {
 public:
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;
  void set_per_rank_statistics(bool per_rank = true) { per_rank_ = per_rank; }
  bool per_rank_statistics() const { return per_rank_; }

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
  bool per_rank_ = false;
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
