#include <algorithm>
#include <numeric>
#include <set>

#include "testing.h"

namespace tessera::testing {
namespace {

// A dataset whose example i is (i, i) as f64 and i64 scalars.
std::shared_ptr<data::TensorDataset> numbered(int64_t n) {
  std::vector<double> values(static_cast<size_t>(n));
  std::iota(values.begin(), values.end(), 0.0);
  Tensor column = Tensor::from_vector(values, {n});
  return std::make_shared<data::TensorDataset>(column.reshape({n, 1}), column.to(DType::i64));
}

std::vector<int64_t> targets_of(data::DataLoader& loader) {
  std::vector<int64_t> out;
  for (const data::Example& batch : loader)
    for (int64_t value : batch.target.to_vector<int64_t>()) out.push_back(value);
  return out;
}

TEST(Sampler, SequentialAndRandom) {
  EXPECT_EQ(data::SequentialSampler(4).indices(), (std::vector<int64_t>{0, 1, 2, 3}));
  data::RandomSampler random(10, /*seed=*/3);
  std::vector<int64_t> first = random.indices();
  EXPECT_EQ(first, random.indices());  // depends only on (seed, epoch)
  EXPECT_EQ(first, data::DataLoader::permutation(10, 3, 0));
  random.set_epoch(1);
  EXPECT_NE(first, random.indices());
  std::sort(first.begin(), first.end());
  EXPECT_EQ(first, data::SequentialSampler(10).indices());

  data::RandomSampler with_replacement(3, 0, true, 50);
  EXPECT_EQ(with_replacement.size(), 50);
  std::set<int64_t> seen;
  for (int64_t index : with_replacement.indices()) {
    EXPECT_TRUE(index >= 0 && index < 3);
    seen.insert(index);
  }
  EXPECT_EQ(seen.size(), 3u);
  EXPECT_HAS(error_of([] { data::RandomSampler(5, 0, false, 3); }), "needs replacement=true");
}

TEST(Sampler, DistributedSplitsLikePyTorch) {
  // torch DistributedSampler(range(10), num_replicas=4, rank=r, shuffle=False):
  // padded to 12 with 0, 1; rank r takes r, r + 4, r + 8.
  std::vector<std::vector<int64_t>> expected = {{0, 4, 8}, {1, 5, 9}, {2, 6, 0}, {3, 7, 1}};
  for (int64_t rank = 0; rank < 4; ++rank) {
    data::DistributedSampler sampler(10, 4, rank, /*shuffle=*/false);
    EXPECT_EQ(sampler.size(), 3);
    EXPECT_EQ(sampler.indices(), expected[static_cast<size_t>(rank)]) << rank;
    // drop_last: 10 -> 8, two each.
    data::DistributedSampler dropping(10, 4, rank, false, 0, /*drop_last=*/true);
    EXPECT_EQ(dropping.indices(), (std::vector<int64_t>{rank, rank + 4}));
  }
  // Shuffled, the ranks cover the dataset once between them, every epoch.
  for (int64_t epoch = 0; epoch < 2; ++epoch) {
    std::vector<int64_t> all;
    for (int64_t rank = 0; rank < 3; ++rank) {
      data::DistributedSampler sampler(9, 3, rank, true, /*seed=*/7);
      sampler.set_epoch(epoch);
      const std::vector<int64_t> mine = sampler.indices();
      all.insert(all.end(), mine.begin(), mine.end());
    }
    std::sort(all.begin(), all.end());
    EXPECT_EQ(all, data::SequentialSampler(9).indices());
  }
  EXPECT_HAS(error_of([] { data::DistributedSampler(10, 4, 4); }),
             "[DistributedSampler] invalid rank 4; rank must be in [0, 3]");
}

TEST(Sampler, DataLoaderTakesASampler) {
  auto dataset = numbered(10);
  auto sampler = std::make_shared<data::DistributedSampler>(10, 2, 1, true, 5);
  data::DataLoader loader(dataset, {.batch_size = 2, .num_workers = 0, .sampler = sampler});
  EXPECT_EQ(loader.size(), 3);
  loader.set_epoch(3);
  EXPECT_EQ(sampler->epoch(), 3);
  EXPECT_EQ(targets_of(loader), sampler->indices());
  EXPECT_HAS(error_of([&] {
               data::DataLoader(dataset, {.shuffle = true, .sampler = sampler});
             }),
             "mutually exclusive");
}

TEST(Subset, SelectsAndRandomSplitPartitions) {
  auto dataset = numbered(10);
  data::Subset subset(dataset, {7, 2, 2});
  EXPECT_EQ(subset.size(), 3);
  EXPECT_EQ(subset.get(0).target.item<int64_t>(), 7);
  EXPECT_EQ(subset.get_batch({2, 0}).target.to_vector<int64_t>(), (std::vector<int64_t>{2, 7}));
  EXPECT_HAS(error_of([&] { data::Subset(dataset, {10}); }), "[Subset] index 10");
  EXPECT_HAS(error_of([&] { subset.get(3); }), "out of range");

  auto parts = data::random_split(dataset, {7, 3}, /*seed=*/1);
  ASSERT_EQ(parts.size(), 2u);
  EXPECT_EQ(parts[0]->size(), 7);
  std::vector<int64_t> all = parts[0]->indices();
  all.insert(all.end(), parts[1]->indices().begin(), parts[1]->indices().end());
  EXPECT_EQ(all, data::DataLoader::permutation(10, 1, 0));
  std::sort(all.begin(), all.end());
  EXPECT_EQ(all, data::SequentialSampler(10).indices());
  data::DataLoader loader(parts[1], {.batch_size = 3, .num_workers = 0});
  EXPECT_EQ(targets_of(loader), parts[1]->indices());
  EXPECT_HAS(error_of([&] { data::random_split(dataset, {5, 4}); }), "add up to 9");
}

TEST(Randperm, IsASeededPermutation) {
  Generator generator(42);
  Tensor p = randperm(20, DType::i64, &generator);
  EXPECT_EQ(p.dtype(), DType::i64);
  std::vector<int64_t> values = p.to_vector<int64_t>();
  Generator again(42);
  EXPECT_EQ(randperm(20, DType::i64, &again).to_vector<int64_t>(), values);
  EXPECT_NE(randperm(20, DType::i64, &again).to_vector<int64_t>(), values);  // advanced
  std::sort(values.begin(), values.end());
  EXPECT_EQ(values, data::SequentialSampler(20).indices());
  EXPECT_EQ(randperm(0).numel(), 0);
  EXPECT_EQ(randperm(3, DType::f32).dtype(), DType::f32);
  EXPECT_HAS(error_of([] { randperm(-1); }), "[randperm] n must be non-negative");
}

TEST(Multinomial, FollowsTheWeights) {
  Generator generator(1);
  // Zero-weight categories are never drawn; frequencies follow the weights.
  Tensor weights = make({0.0, 1.0, 3.0, 0.0});
  std::vector<int64_t> counts(4);
  for (int64_t c : multinomial(weights, 4000, true, &generator).to_vector<int64_t>()) ++counts[c];
  EXPECT_EQ(counts[0] + counts[3], 0);
  EXPECT_NEAR(counts[2] / 4000.0, 0.75, 0.03);
  // Without replacement: distinct indices, all the non-zero ones.
  Tensor rows = make({1.0, 0.0, 2.0, 5.0, 0.5, 0.5, 0.0, 1.0}, {2, 4});
  Tensor drawn = multinomial(rows, 3, false, &generator);
  EXPECT_EQ(drawn.shape(), (Shape{2, 3}));
  std::vector<int64_t> first(3), second(3);
  const std::vector<int64_t> values = drawn.to_vector<int64_t>();
  std::copy(values.begin(), values.begin() + 3, first.begin());
  std::copy(values.begin() + 3, values.end(), second.begin());
  std::sort(first.begin(), first.end());
  std::sort(second.begin(), second.end());
  EXPECT_EQ(first, (std::vector<int64_t>{0, 2, 3}));
  EXPECT_EQ(second, (std::vector<int64_t>{0, 1, 3}));
  // The first draw without replacement follows the weights too.
  int64_t heavy = 0;
  for (int i = 0; i < 2000; ++i)
    heavy += multinomial(make({1.0, 3.0}), 1, false, &generator).item<int64_t>() == 1;
  EXPECT_NEAR(heavy / 2000.0, 0.75, 0.04);
  Generator same_a(9), same_b(9);
  EXPECT_EQ(multinomial(rows, 2, false, &same_a).to_vector<int64_t>(),
            multinomial(rows, 2, false, &same_b).to_vector<int64_t>());

  EXPECT_HAS(error_of([&] { multinomial(weights, 3, false); }),
             "row 0 has only 2 categories with non-zero probability");
  EXPECT_HAS(error_of([&] { multinomial(make({-1.0, 2.0}), 1); }), "non-negative");
  EXPECT_HAS(error_of([&] { multinomial(make({0.0, 0.0}), 1, true); }), "sums to 0");
  EXPECT_HAS(error_of([&] { multinomial(make({1.0, 1.0}), 3); }), "without replacement from 2");
  EXPECT_HAS(error_of([&] { multinomial(make({1.0}, {1, 1, 1}), 1); }), "1-D or 2-D");
}

}  // namespace
}  // namespace tessera::testing
