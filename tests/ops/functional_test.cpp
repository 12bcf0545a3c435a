// normalize, cosine_similarity, pairwise_distance and one_hot against
// PyTorch and hand values.

#include <cmath>
#include <string>

#include "testing.h"
#include "torch_check.h"

namespace tessera::testing {
namespace {

using V = std::vector<Tensor>;

TEST(Functional, HandValues) {
  EXPECT_TRUE(all_close(normalize(make({3.0, 4.0}), 2.0, 0), {0.6, 0.8}, 1e-12, 0));
  EXPECT_TRUE(all_close(cosine_similarity(make({1.0, 0.0}, {1, 2}), make({1.0, 1.0}, {1, 2})),
                        {std::sqrt(0.5)}, 1e-12, 0));
  EXPECT_TRUE(
      all_close(pairwise_distance(make({0.0, 0.0}, {1, 2}), make({3.0, 4.0}, {1, 2}), 2.0, 0.0),
                {5.0}, 1e-12, 0));
  Tensor hot = one_hot(tensor<int64_t>({2, 0}));
  EXPECT_EQ(hot.dtype(), DType::i64);
  EXPECT_EQ(hot.shape(), (Shape{2, 3}));
  EXPECT_EQ(hot.to_vector<int64_t>(), (std::vector<int64_t>{0, 0, 1, 1, 0, 0}));
}

TEST(FunctionalTorch, Normalize) {
  for (const char* p : {"2.0", "1.0", "3.0", "inf", "0.5"}) {
    const double pv = std::stod(std::string(p) == "inf" ? "inf" : p);
    EXPECT_TRUE(sweep_torch(std::string("F.normalize(a, p=") + p + ")",
                            {{{3, 4}}, {{2, 3, 4}}, {{0, 3}}},
                            [pv](const V& x) { return normalize(x[0], pv); }));
    EXPECT_TRUE(sweep_torch(std::string("F.normalize(a, p=") + p + ", dim=-1, eps=0.1)",
                            {{{3, 4}}, {{5}}, {{2, 0}}},
                            [pv](const V& x) { return normalize(x[0], pv, -1, 0.1); }));
  }
  EXPECT_TRUE(
      matches_torch("F.normalize(a)", {uniform({4})}, [](const V& x) { return normalize(x[0]); }));
}

TEST(FunctionalTorch, CosineSimilarityAndPairwiseDistance) {
  const std::vector<std::vector<Shape>> pairs{
      {{3, 4}, {3, 4}}, {{2, 3, 4}, {3, 1}}, {{0, 4}, {0, 4}}, {{4, 5}, {5}}};
  EXPECT_TRUE(sweep_torch("F.cosine_similarity(a, b)", pairs,
                          [](const V& x) { return cosine_similarity(x[0], x[1]); }));
  EXPECT_TRUE(sweep_torch("F.cosine_similarity(a, b, dim=-1, eps=0.5)", pairs,
                          [](const V& x) { return cosine_similarity(x[0], x[1], -1, 0.5); }));
  for (double p : {2.0, 1.0, 3.0}) {
    for (bool keepdim : {false, true}) {
      EXPECT_TRUE(sweep_torch("F.pairwise_distance(a, b, p=" + std::to_string(p) +
                                  ", keepdim=" + (keepdim ? "True" : "False") + ")",
                              pairs, [p, keepdim](const V& x) {
                                return pairwise_distance(x[0], x[1], p, 1e-6, keepdim);
                              }));
    }
  }
  EXPECT_TRUE(matches_torch("F.cosine_similarity(a, b, dim=3)", {uniform({2, 3}), uniform({2, 3})},
                            [](const V& x) { return cosine_similarity(x[0], x[1], 3); }));
}

TEST(FunctionalTorch, OneHot) {
  TorchOptions ints;
  ints.dtype = DType::i64;
  ints.low = 0;
  ints.high = 5;
  EXPECT_TRUE(sweep_torch(
      "F.one_hot(a)", {{{4}}, {{2, 3}}, {{}}}, [](const V& x) { return one_hot(x[0]); }, ints));
  EXPECT_TRUE(sweep_torch(
      "F.one_hot(a, 7)", {{{4}}, {{2, 3}}, {{0, 2}}}, [](const V& x) { return one_hot(x[0], 7); },
      ints));
  EXPECT_TRUE(matches_torch("F.one_hot(a, 2)", {tensor<int64_t>({0, 3})},
                            [](const V& x) { return one_hot(x[0], 2); }));
  EXPECT_TRUE(matches_torch("F.one_hot(a)", {tensor<int64_t>({-1, 3})},
                            [](const V& x) { return one_hot(x[0]); }));
  EXPECT_THROW(one_hot(make({1.0})), Error);
  EXPECT_THROW(one_hot(zeros({0}, DType::i64)), Error);
}

TEST(FunctionalTorch, EmbeddingBag) {
  const Tensor ids = tensor<int64_t>({1, 4, 0, 4, 2, 3, 1});
  const Tensor offsets = tensor<int64_t>({0, 2, 2, 5});
  const Tensor ends = tensor<int64_t>({0, 2, 2, 5, 7});
  const Tensor weight = uniform({5, 3});
  const Tensor sample = uniform({7}, 0.5, 2.0, 3);
  for (const std::string mode : {"sum", "mean", "max"}) {
    for (const bool last : {false, true}) {
      const std::string kw =
          ", mode='" + mode + "', include_last_offset=" + (last ? "True" : "False");
      EXPECT_TRUE(matches_torch(
          "F.embedding_bag(a, b, c" + kw + ")", {ids, weight, last ? ends : offsets},
          [&](const V& x) { return embedding_bag(x[0], x[1], x[2], mode, {}, last); }))
          << mode << last;
      EXPECT_TRUE(matches_torch(
          "F.embedding_bag(a, b, c" + kw + ", padding_idx=4)", {ids, weight, last ? ends : offsets},
          [&](const V& x) { return embedding_bag(x[0], x[1], x[2], mode, {}, last, 4); }))
          << mode << last;
    }
    EXPECT_TRUE(matches_torch("F.embedding_bag(a, b, mode='" + mode + "')",
                              {tensor<int64_t>({1, 4, 0, 3, 2, 2}).reshape({2, 3}), weight},
                              [&](const V& x) { return embedding_bag(x[0], x[1], {}, mode); }));
  }
  EXPECT_TRUE(matches_torch(
      "F.embedding_bag(a, b, c, mode='sum', per_sample_weights=d)", {ids, weight, offsets, sample},
      [](const V& x) { return embedding_bag(x[0], x[1], x[2], "sum", x[3]); }));
  EXPECT_TRUE(matches_torch(
      "F.embedding_bag(a, b, c, mode='mean', per_sample_weights=d)", {ids, weight, offsets, sample},
      [](const V& x) { return embedding_bag(x[0], x[1], x[2], "mean", x[3]); }));
  // Hand values: bags {1, 4}, {}, {0, 4, 2}, {3, 1} summed.
  const Tensor w = make({0.0, 1.0, 2.0, 3.0, 4.0}, {5, 1});
  EXPECT_TRUE(all_close(embedding_bag(ids, w, offsets, "sum"), {5.0, 0.0, 6.0, 4.0}, 1e-12, 0));
  EXPECT_THROW(embedding_bag(ids, w, offsets, "median"), Error);
  EXPECT_THROW(embedding_bag(tensor<int64_t>({7}), w, tensor<int64_t>({0})), Error);
}

}  // namespace
}  // namespace tessera::testing
