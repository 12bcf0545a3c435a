#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>

#include "testing.h"

namespace tessera::testing {
namespace {

using data::DataLoader;
using data::Example;

// n examples whose data and target are both the example's index.
std::shared_ptr<data::TensorDataset> indexed(int64_t n) {
  std::vector<int64_t> values(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) values[static_cast<size_t>(i)] = i;
  Tensor column = Tensor::from_vector(values, {n});
  return std::make_shared<data::TensorDataset>(column.reshape({n, 1}), column);
}

// The targets of every batch of one pass.
std::vector<std::vector<int64_t>> collect(DataLoader& loader) {
  std::vector<std::vector<int64_t>> batches;
  for (const Example& batch : loader) batches.push_back(batch.target.to_vector<int64_t>());
  return batches;
}

std::vector<int64_t> flatten(const std::vector<std::vector<int64_t>>& batches) {
  std::vector<int64_t> all;
  for (const auto& batch : batches) all.insert(all.end(), batch.begin(), batch.end());
  return all;
}

// Counts get_batch calls and optionally throws at one index or sleeps.
struct Probe : data::Dataset {
  explicit Probe(int64_t n, int64_t throw_at = -1, int sleep_ms = 0)
      : n(n), throw_at(throw_at), sleep_ms(sleep_ms) {}
  int64_t size() const override { return n; }
  Example get(int64_t index) const override {
    check_index(index, "Probe");
    TESSERA_CHECK(index != throw_at, "[Probe] refusing index ", index);
    return {make({double(index)}, {1}), make({double(index)}, {}, DType::i64)};
  }
  Example get_batch(const std::vector<int64_t>& indices) const override {
    ++calls;
    if (sleep_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(sleep_ms));
    return Dataset::get_batch(indices);
  }
  int64_t n, throw_at;
  int sleep_ms;
  mutable std::atomic<int> calls{0};
};

TEST(DataLoader, BatchesInOrderWithPartialLastBatch) {
  auto dataset = indexed(10);
  for (int workers : {0, 1, 3}) {
    DataLoader loader(dataset, {.batch_size = 4, .num_workers = workers});
    EXPECT_EQ(loader.size(), 3);
    std::vector<Shape> shapes;
    std::vector<std::vector<int64_t>> batches;
    for (const Example& batch : loader) {
      shapes.push_back(batch.data.shape());
      batches.push_back(batch.target.to_vector<int64_t>());
      EXPECT_EQ(batch.data.to_vector<int64_t>(), batches.back());
    }
    EXPECT_EQ(shapes, (std::vector<Shape>{{4, 1}, {4, 1}, {2, 1}})) << workers;
    EXPECT_EQ(batches, (std::vector<std::vector<int64_t>>{{0, 1, 2, 3}, {4, 5, 6, 7}, {8, 9}}));
  }
}

TEST(DataLoader, DropLastSkipsPartialBatch) {
  DataLoader loader(indexed(10), {.batch_size = 4, .drop_last = true});
  EXPECT_EQ(loader.size(), 2);
  EXPECT_EQ(collect(loader), (std::vector<std::vector<int64_t>>{{0, 1, 2, 3}, {4, 5, 6, 7}}));
  DataLoader exact(indexed(8), {.batch_size = 4, .drop_last = true});
  EXPECT_EQ(exact.size(), 2);
  DataLoader too_small(indexed(3), {.batch_size = 4, .drop_last = true});
  EXPECT_EQ(too_small.size(), 0);
  EXPECT_TRUE(collect(too_small).empty());
}

TEST(DataLoader, EmptyDatasetYieldsNothing) {
  DataLoader loader(indexed(0), {.batch_size = 2});
  EXPECT_EQ(loader.size(), 0);
  EXPECT_TRUE(loader.begin() == loader.end());
}

TEST(DataLoader, ShuffleIsAPermutationPerEpoch) {
  DataLoader loader(indexed(103), {.batch_size = 10, .shuffle = true, .seed = 7});
  for (int64_t epoch : {0, 1, 5}) {
    loader.set_epoch(epoch);
    std::vector<int64_t> order = flatten(collect(loader));
    EXPECT_EQ(order, loader.indices());
    std::vector<int64_t> sorted = order;
    std::sort(sorted.begin(), sorted.end());
    std::vector<int64_t> expected(103);
    for (int64_t i = 0; i < 103; ++i) expected[static_cast<size_t>(i)] = i;
    EXPECT_EQ(sorted, expected) << "epoch " << epoch << " is not a permutation";
    EXPECT_NE(order, expected) << "epoch " << epoch << " was not shuffled";
  }
}

TEST(DataLoader, ShuffleDependsOnlyOnSeedAndEpoch) {
  auto dataset = indexed(50);
  DataLoader a(dataset, {.batch_size = 8, .shuffle = true, .seed = 3});
  DataLoader b(dataset, {.batch_size = 8, .shuffle = true, .seed = 3, .num_workers = 0});
  a.set_epoch(2);
  b.set_epoch(2);
  const auto epoch2 = collect(a);
  EXPECT_EQ(epoch2, collect(b));
  EXPECT_EQ(epoch2, collect(a)) << "a second pass of the same epoch must repeat the order";
  a.set_epoch(3);
  EXPECT_NE(collect(a), epoch2);
  DataLoader other_seed(dataset, {.batch_size = 8, .shuffle = true, .seed = 4});
  other_seed.set_epoch(2);
  EXPECT_NE(collect(other_seed), epoch2);
}

TEST(DataLoader, PermutationIsPinnedAcrossPlatforms) {
  // Philox4x32-10 + Fisher-Yates (j = (r64 * (i + 1)) >> 64), computed by an
  // independent Python implementation. These must never change, or saved
  // runs stop being reproducible.
  EXPECT_EQ(DataLoader::permutation(10, 0, 0),
            (std::vector<int64_t>{7, 1, 0, 3, 6, 8, 4, 9, 2, 5}));
  EXPECT_EQ(DataLoader::permutation(10, 1234, 7),
            (std::vector<int64_t>{9, 5, 2, 3, 4, 0, 6, 7, 1, 8}));
  EXPECT_TRUE(DataLoader::permutation(0, 1, 1).empty());
  EXPECT_EQ(DataLoader::permutation(1, 1, 1), (std::vector<int64_t>{0}));
}

TEST(DataLoader, PermutationIsRoughlyUniform) {
  // Where element 0 lands over 4000 epochs: 800 expected per slot of 5.
  std::vector<int> landed(5, 0);
  for (int64_t epoch = 0; epoch < 4000; ++epoch) {
    std::vector<int64_t> order = DataLoader::permutation(5, 11, epoch);
    landed[static_cast<size_t>(std::find(order.begin(), order.end(), 0) - order.begin())]++;
  }
  for (int count : landed) {
    EXPECT_GT(count, 700);
    EXPECT_LT(count, 900);
  }
}

TEST(DataLoader, WorkersMatchSingleThreadedLoading) {
  auto dataset = indexed(57);
  DataLoader reference(dataset, {.batch_size = 5, .shuffle = true, .seed = 9, .num_workers = 0});
  reference.set_epoch(4);
  const auto expected = collect(reference);
  for (int workers : {1, 2, 3, 16}) {
    for (int prefetch : {1, 4}) {
      DataLoader loader(dataset, {.batch_size = 5,
                                  .shuffle = true,
                                  .seed = 9,
                                  .num_workers = workers,
                                  .prefetch = prefetch});
      loader.set_epoch(4);
      EXPECT_EQ(collect(loader), expected) << workers << " workers, prefetch " << prefetch;
    }
  }
}

TEST(DataLoader, WorkerExceptionReachesConsumerAfterEarlierBatches) {
  for (int workers : {0, 1, 3}) {
    auto dataset = std::make_shared<Probe>(40, /*throw_at=*/17);
    DataLoader loader(dataset, {.batch_size = 4, .num_workers = workers});
    std::vector<std::vector<int64_t>> seen;
    std::string message = error_of([&] {
      for (const Example& batch : loader) seen.push_back(batch.target.to_vector<int64_t>());
    });
    EXPECT_HAS(message, "[Probe] refusing index 17");
    ASSERT_EQ(seen.size(), 4u) << workers << " workers";  // batches 0..3; 17 is in batch 4
    EXPECT_EQ(seen[3], (std::vector<int64_t>{12, 13, 14, 15}));
    // The loader is reusable after a failed pass.
    auto good = std::make_shared<Probe>(6);
    DataLoader again(good, {.batch_size = 4, .num_workers = workers});
    EXPECT_EQ(collect(again).size(), 2u);
  }
}

TEST(DataLoader, ExceptionInFirstBatchComesFromBegin) {
  auto dataset = std::make_shared<Probe>(8, /*throw_at=*/0);
  DataLoader loader(dataset, {.batch_size = 4, .num_workers = 2});
  EXPECT_HAS(error_of([&] { loader.begin(); }), "refusing index 0");
}

TEST(DataLoader, EarlyBreakReleasesThePass) {
  auto dataset = std::make_shared<Probe>(1000, -1, /*sleep_ms=*/1);
  {
    DataLoader loader(dataset, {.batch_size = 2, .num_workers = 4, .prefetch = 3});
    int steps = 0;
    for (const Example& batch : loader) {
      (void)batch;
      if (++steps == 3) break;
    }
    // The pass (and its threads) went away with the loop's iterator.
    EXPECT_EQ(dataset.use_count(), 2);            // this test and the loader
    EXPECT_LE(dataset->calls.load(), 3 + 4 * 3);  // consumed + prefetch per worker
    // A new pass starts from the beginning.
    auto it = loader.begin();
    EXPECT_EQ(it->target.to_vector<int64_t>(), (std::vector<int64_t>{0, 1}));
  }  // destroying the loader mid-pass must not hang
  EXPECT_EQ(dataset.use_count(), 1);
}

TEST(DataLoader, PrefetchBoundsWorkAhead) {
  auto dataset = std::make_shared<Probe>(100);
  DataLoader loader(dataset, {.batch_size = 1, .num_workers = 1, .prefetch = 2});
  auto it = loader.begin();
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  // Batch 0 consumed, and at most `prefetch` more loaded ahead.
  EXPECT_LE(dataset->calls.load(), 3);
  EXPECT_GE(dataset->calls.load(), 1);
}

TEST(DataLoader, NewPassStopsThePreviousOne) {
  DataLoader loader(indexed(20), {.batch_size = 2, .num_workers = 2});
  auto first = loader.begin();
  EXPECT_FALSE(first == loader.end());
  auto second = loader.begin();
  EXPECT_TRUE(first == loader.end());
  EXPECT_EQ(second->target.to_vector<int64_t>(), (std::vector<int64_t>{0, 1}));
  EXPECT_HAS(error_of([&] { *first; }), "past the end");
  int count = 0;
  for (; !(second == loader.end()); ++second) ++count;
  EXPECT_EQ(count, 10);
}

TEST(DataLoader, IteratorOutlivingLoaderReadsAsEnded) {
  DataLoader::Iterator it;
  {
    DataLoader loader(indexed(20), {.batch_size = 2});
    it = loader.begin();
  }
  EXPECT_TRUE(it == DataLoader::Iterator());
}

TEST(DataLoader, RejectsBadOptions) {
  auto dataset = indexed(4);
  EXPECT_HAS(error_of([&] { DataLoader(dataset, {.batch_size = 0}); }),
             "[DataLoader] batch_size must be >= 1, got 0");
  EXPECT_HAS(error_of([&] { DataLoader(dataset, {.batch_size = -3}); }), "got -3");
  EXPECT_HAS(error_of([&] { DataLoader(dataset, {.num_workers = -1}); }), "num_workers");
  EXPECT_HAS(error_of([&] { DataLoader(dataset, {.prefetch = 0}); }), "prefetch");
  EXPECT_HAS(error_of([] { DataLoader(nullptr); }), "null");
}

}  // namespace
}  // namespace tessera::testing
