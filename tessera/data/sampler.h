#pragma once

// The order in which a DataLoader visits a dataset, as torch.utils.data's
// samplers. A sampler yields example indices for one epoch; set_epoch picks
// the epoch (the shuffle order depends only on (seed, epoch), so every rank
// and every run agrees).
//
//   auto sampler = std::make_shared<data::DistributedSampler>(dataset->size(), world, rank);
//   data::DataLoader loader(dataset, {.batch_size = 64, .sampler = sampler});
//   loader.set_epoch(epoch);  // also sets the sampler's epoch

#include <cstdint>
#include <vector>

namespace tessera::data {

class Sampler {
 public:
  virtual ~Sampler() = default;
  // The indices of one epoch, in order.
  virtual std::vector<int64_t> indices() const = 0;
  // How many indices one epoch yields.
  virtual int64_t size() const = 0;
  void set_epoch(int64_t epoch) { epoch_ = epoch; }
  int64_t epoch() const { return epoch_; }

 private:
  int64_t epoch_ = 0;
};

// 0, 1, ..., n - 1.
class SequentialSampler : public Sampler {
 public:
  explicit SequentialSampler(int64_t n);
  std::vector<int64_t> indices() const override;
  int64_t size() const override { return n_; }

 private:
  int64_t n_;
};

// A permutation of [0, n) that depends only on (seed, epoch), as
// DataLoader's shuffle; with replacement, num_samples (default n) draws
// from [0, n) with repeats.
class RandomSampler : public Sampler {
 public:
  explicit RandomSampler(int64_t n, uint64_t seed = 0, bool replacement = false,
                         int64_t num_samples = -1);
  std::vector<int64_t> indices() const override;
  int64_t size() const override { return num_samples_; }

 private:
  int64_t n_;
  uint64_t seed_;
  bool replacement_;
  int64_t num_samples_;
};

// The share of [0, n) that rank `rank` of `num_replicas` visits, as
// torch.utils.data.DistributedSampler: the (shuffled, when `shuffle`)
// indices are padded by repeating from the start to a multiple of
// num_replicas (or, with drop_last, cut down to one), and rank r takes every
// num_replicas-th index from r. Every rank gets the same count.
class DistributedSampler : public Sampler {
 public:
  DistributedSampler(int64_t n, int64_t num_replicas, int64_t rank, bool shuffle = true,
                     uint64_t seed = 0, bool drop_last = false);
  std::vector<int64_t> indices() const override;
  int64_t size() const override { return num_samples_; }

 private:
  int64_t n_;
  int64_t num_replicas_;
  int64_t rank_;
  bool shuffle_;
  uint64_t seed_;
  bool drop_last_;
  int64_t num_samples_;
};

}  // namespace tessera::data
