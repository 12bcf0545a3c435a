#include "tessera/data/sampler.h"

#include <numeric>

#include "tessera/core/error.h"
#include "tessera/core/rng.h"
#include "tessera/data/dataloader.h"

namespace tessera::data {

SequentialSampler::SequentialSampler(int64_t n) : n_(n) {
  TESSERA_CHECK(n >= 0, "[SequentialSampler] n must be >= 0, got ", n);
}

std::vector<int64_t> SequentialSampler::indices() const {
  std::vector<int64_t> order(static_cast<size_t>(n_));
  std::iota(order.begin(), order.end(), int64_t{0});
  return order;
}

RandomSampler::RandomSampler(int64_t n, uint64_t seed, bool replacement, int64_t num_samples)
    : n_(n), seed_(seed), replacement_(replacement), num_samples_(num_samples < 0 ? n : num_samples) {
  TESSERA_CHECK(n >= 0, "[RandomSampler] n must be >= 0, got ", n);
  TESSERA_CHECK(num_samples == -1 || num_samples > 0, "[RandomSampler] num_samples must be "
                "positive (or -1 for n), got ", num_samples);
  TESSERA_CHECK(replacement || num_samples_ == n, "[RandomSampler] num_samples (", num_samples_,
                ") differs from n (", n, "); that needs replacement=true");
  TESSERA_CHECK(!replacement || n > 0, "[RandomSampler] cannot draw with replacement from 0 examples");
}

std::vector<int64_t> RandomSampler::indices() const {
  if (!replacement_) return DataLoader::permutation(n_, seed_, epoch());
  std::vector<int64_t> out(static_cast<size_t>(num_samples_));
  for (int64_t i = 0; i < num_samples_; ++i) {
    const auto words =
        Philox::block(seed_, static_cast<uint64_t>(epoch()), static_cast<uint64_t>(i));
    const uint64_t random = (static_cast<uint64_t>(words[0]) << 32) | words[1];
    out[static_cast<size_t>(i)] = static_cast<int64_t>(
        (static_cast<unsigned __int128>(random) * static_cast<uint64_t>(n_)) >> 64);
  }
  return out;
}

DistributedSampler::DistributedSampler(int64_t n, int64_t num_replicas, int64_t rank,
                                       bool shuffle, uint64_t seed, bool drop_last)
    : n_(n),
      num_replicas_(num_replicas),
      rank_(rank),
      shuffle_(shuffle),
      seed_(seed),
      drop_last_(drop_last) {
  TESSERA_CHECK(n >= 0, "[DistributedSampler] n must be >= 0, got ", n);
  TESSERA_CHECK(num_replicas > 0, "[DistributedSampler] num_replicas must be positive, got ",
                num_replicas);
  TESSERA_CHECK(rank >= 0 && rank < num_replicas, "[DistributedSampler] invalid rank ", rank,
                "; rank must be in [0, ", num_replicas - 1, "]");
  // PyTorch's ceil((n - num_replicas) / num_replicas) with drop_last, else
  // ceil(n / num_replicas).
  num_samples_ = drop_last && n % num_replicas != 0 ? (n - 1) / num_replicas
                                                     : (n + num_replicas - 1) / num_replicas;
}

std::vector<int64_t> DistributedSampler::indices() const {
  std::vector<int64_t> all;
  if (shuffle_) {
    all = DataLoader::permutation(n_, seed_, epoch());
  } else {
    all.resize(static_cast<size_t>(n_));
    std::iota(all.begin(), all.end(), int64_t{0});
  }
  const size_t total = static_cast<size_t>(num_samples_ * num_replicas_);
  if (all.size() < total) {
    TESSERA_CHECK(!all.empty(), "[DistributedSampler] cannot pad an empty dataset to ",
                  num_replicas_, " replicas");
    const size_t original = all.size();
    for (size_t i = 0; all.size() < total; ++i) all.push_back(all[i % original]);
  }
  all.resize(total);
  std::vector<int64_t> mine;
  for (size_t i = static_cast<size_t>(rank_); i < total; i += static_cast<size_t>(num_replicas_))
    mine.push_back(all[i]);
  return mine;
}

}  // namespace tessera::data
