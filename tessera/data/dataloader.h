#pragma once

// Batches a Dataset, optionally shuffled, loading ahead on background
// threads. Batches always come out in order, so a run with workers yields
// exactly what num_workers = 0 yields.
//
//   data::DataLoader loader(dataset, {.batch_size = 128, .shuffle = true, .seed = 1});
//   for (int64_t epoch = 0; epoch < epochs; ++epoch) {
//     loader.set_epoch(epoch);
//     for (const data::Example& batch : loader) { ... }
//   }

#include <cstddef>
#include <cstdint>
#include <iterator>
#include <memory>
#include <vector>

#include "tessera/data/dataset.h"
#include "tessera/data/sampler.h"

namespace tessera::data {

// Member order matters: callers use designated initialisers in this order.
struct DataLoaderOptions {
  int64_t batch_size = 1;
  // Visit the examples in a permutation that depends only on (seed, epoch).
  bool shuffle = false;
  // Skip the last batch when it would be smaller than batch_size.
  bool drop_last = false;
  uint64_t seed = 0;
  // Background loading threads; 0 loads each batch on the caller's thread.
  int num_workers = 1;
  // Batches each worker may hold ready ahead of the consumer.
  int prefetch = 2;
  // Where the indices come from (RandomSampler, DistributedSampler, ...)
  // instead of shuffle; null for the order shuffle gives.
  std::shared_ptr<Sampler> sampler = nullptr;
};

class DataLoader {
  class Run;

 public:
  // Input iterator over one pass. Incrementing may block until the batch is
  // ready and rethrows any exception the dataset threw while loading it.
  class Iterator {
   public:
    using iterator_category = std::input_iterator_tag;
    using value_type = Example;
    using difference_type = std::ptrdiff_t;
    using pointer = const Example*;
    using reference = const Example&;

    Iterator() = default;
    // The current batch; valid until the next increment.
    reference operator*() const;
    pointer operator->() const { return &**this; }
    // Moves to the next batch.
    Iterator& operator++();
    // Moves to the next batch (input iterators need not return a copy).
    void operator++(int) { ++*this; }
    // Iterators are equal when both are past the end, or both are the same live pass.
    bool operator==(const Iterator& other) const;

   private:
    friend class DataLoader;
    explicit Iterator(std::shared_ptr<Run> run) : run_(std::move(run)) {}
    bool at_end() const;
    std::shared_ptr<Run> run_;
  };

  // Throws on a null dataset, batch_size < 1, num_workers outside [0, 256],
  // prefetch < 1 or both a sampler and shuffle.
  explicit DataLoader(std::shared_ptr<const Dataset> dataset, DataLoaderOptions options = {});
  ~DataLoader();
  DataLoader(const DataLoader&) = delete;
  DataLoader& operator=(const DataLoader&) = delete;

  // Number of batches in one pass.
  int64_t size() const;
  // Selects the shuffle order of later passes (a pass uses the epoch set when
  // it begins); with a sampler, sets the sampler's epoch too.
  void set_epoch(int64_t epoch);
  // The epoch set by set_epoch (0 initially).
  int64_t epoch() const { return epoch_; }
  // The options given at construction.
  const DataLoaderOptions& options() const { return options_; }
  // The dataset being batched.
  const std::shared_ptr<const Dataset>& dataset() const { return dataset_; }
  // Example indices in the order the current epoch visits them.
  std::vector<int64_t> indices() const;

  // Starts a pass and waits for its first batch. A loader runs one pass at a
  // time: beginning a new one stops the previous pass (its iterators then
  // compare equal to end()). Threads stop when the pass ends, when its last
  // iterator is destroyed (e.g. after a break), at the next begin(), or when
  // the loader is destroyed.
  Iterator begin();
  // The past-the-end iterator.
  Iterator end() const { return Iterator(); }

  // Fisher-Yates permutation of [0, n) driven by Philox(seed, epoch): the
  // same on every platform and standard library.
  static std::vector<int64_t> permutation(int64_t n, uint64_t seed, int64_t epoch);

 private:
  std::shared_ptr<const Dataset> dataset_;
  DataLoaderOptions options_;
  int64_t epoch_ = 0;
  std::weak_ptr<Run> active_;
};

}  // namespace tessera::data
