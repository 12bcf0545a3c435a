// Elementwise losses and cross_entropy with class-probability targets
// against PyTorch (values and gradients for input and target) and against
// hand values.

#include <cmath>
#include <string>

#include "testing.h"
#include "torch_check.h"

namespace tessera::testing {
namespace {

using V = std::vector<Tensor>;

const std::vector<std::string> kReductions{"mean", "sum", "none"};

// Same-shape, broadcast, 0-d and empty pairs.
const std::vector<std::vector<Shape>> kPairs{
    {{3, 4}, {3, 4}}, {{2, 1, 3}, {4, 3}}, {{}, {}}, {{0, 3}, {0, 3}}};

TEST(ElementwiseLoss, HandValues) {
  Tensor a = make({1.0, 2.0, 0.0});
  Tensor b = make({0.0, 4.0, 0.5});
  EXPECT_TRUE(all_close(l1_loss(a, b, "none"), {1.0, 2.0, 0.5}, 1e-12, 0));
  EXPECT_TRUE(all_close(smooth_l1_loss(a, b, "none"), {0.5, 1.5, 0.125}, 1e-12, 0));
  EXPECT_TRUE(all_close(huber_loss(a, b, "sum", 2.0), {0.5 + 2.0 + 0.125}, 1e-12, 0));
  Tensor p = make({0.5, 0.25});
  Tensor y = make({1.0, 0.0});
  EXPECT_TRUE(all_close(binary_cross_entropy(p, y, {}, "none"), {-std::log(0.5), -std::log(0.75)},
                        1e-12, 0));
  EXPECT_TRUE(
      all_close(kl_div(make({-1.0}), make({0.5}), "sum"), {0.5 * (std::log(0.5) + 1.0)}, 1e-12, 0));
}

TEST(ElementwiseLossTorch, L1SmoothL1Huber) {
  for (const std::string& r : kReductions) {
    EXPECT_TRUE(sweep_torch("F.l1_loss(a, b, reduction='" + r + "')", kPairs,
                            [r](const V& x) { return l1_loss(x[0], x[1], r); }));
    for (double beta : {1.0, 0.3, 0.0}) {
      EXPECT_TRUE(sweep_torch(
          "F.smooth_l1_loss(a, b, reduction='" + r + "', beta=" + std::to_string(beta) + ")",
          kPairs, [r, beta](const V& x) { return smooth_l1_loss(x[0], x[1], r, beta); }));
    }
    EXPECT_TRUE(sweep_torch("F.huber_loss(a, b, reduction='" + r + "', delta=0.4)", kPairs,
                            [r](const V& x) { return huber_loss(x[0], x[1], r, 0.4); }));
  }
  EXPECT_TRUE(matches_torch("F.smooth_l1_loss(a, b, beta=-1.0)", {uniform({2}), uniform({2})},
                            [](const V& x) { return smooth_l1_loss(x[0], x[1], "mean", -1.0); }));
  EXPECT_TRUE(matches_torch("F.huber_loss(a, b, delta=0.0)", {uniform({2}), uniform({2})},
                            [](const V& x) { return huber_loss(x[0], x[1], "mean", 0.0); }));
  EXPECT_TRUE(matches_torch("F.l1_loss(a, b)", {uniform({2, 3}), uniform({4})},
                            [](const V& x) { return l1_loss(x[0], x[1]); }));
  EXPECT_THROW(l1_loss(uniform({2}), uniform({2}), "avg"), Error);
}

TEST(ElementwiseLossTorch, KlDiv) {
  TorchOptions positive;
  positive.low = 0.1;
  for (const std::string r : {"mean", "sum", "none", "batchmean"}) {
    EXPECT_TRUE(sweep_torch(
        "F.kl_div(a, b, reduction='" + r + "')", kPairs,
        [r](const V& x) { return kl_div(x[0], x[1], r); }, positive));
    EXPECT_TRUE(sweep_torch("F.kl_div(a, b, reduction='" + r + "', log_target=True)", kPairs,
                            [r](const V& x) { return kl_div(x[0], x[1], r, true); }));
  }
  // A zero target contributes zero.
  EXPECT_TRUE(matches_torch(
      "F.kl_div(a, b, reduction='sum')", {uniform({3}), make({0.0, 0.5, 0.25})},
      [](const V& x) { return kl_div(x[0], x[1], "sum"); },
      [] {
        TorchOptions o;
        o.grad = false;
        return o;
      }()));
}

TEST(ElementwiseLossTorch, BinaryCrossEntropy) {
  TorchOptions probs;
  probs.low = 0.05;
  probs.high = 0.95;
  const std::vector<std::vector<Shape>> same{{{3, 4}, {3, 4}}, {{}, {}}, {{0, 3}, {0, 3}}};
  const std::vector<std::vector<Shape>> weighted{
      {{3, 4}, {3, 4}, {4}}, {{2, 3}, {2, 3}, {2, 1}}, {{0, 3}, {0, 3}, {3}}};
  for (const std::string& r : kReductions) {
    EXPECT_TRUE(sweep_torch(
        "F.binary_cross_entropy(a, b, reduction='" + r + "')", same,
        [r](const V& x) { return binary_cross_entropy(x[0], x[1], {}, r); }, probs));
    EXPECT_TRUE(sweep_torch(
        "F.binary_cross_entropy(a, b, weight=c.detach(), reduction='" + r + "')", weighted,
        [r](const V& x) { return binary_cross_entropy(x[0], x[1], x[2].detach(), r); }, probs));
    EXPECT_TRUE(sweep_torch(
        "F.binary_cross_entropy_with_logits(a, b, reduction='" + r + "')", same,
        [r](const V& x) { return binary_cross_entropy_with_logits(x[0], x[1], {}, r); }, probs));
    EXPECT_TRUE(sweep_torch(
        "F.binary_cross_entropy_with_logits(a, b, weight=c.detach(), reduction='" + r +
            "', pos_weight=c.detach() * 2)",
        weighted,
        [r](const V& x) {
          return binary_cross_entropy_with_logits(x[0], x[1], x[2].detach(), r,
                                                  mul(x[2].detach(), 2.0));
        },
        probs));
  }
  // Saturated probabilities: the logs clamp at -100.
  EXPECT_TRUE(matches_torch(
      "F.binary_cross_entropy(a, b, reduction='none')",
      {make({0.0, 1.0, 0.5}), make({1.0, 0.0, 0.5})},
      [](const V& x) { return binary_cross_entropy(x[0], x[1], {}, "none"); },
      [] {
        TorchOptions o;
        o.grad = false;
        return o;
      }()));
  EXPECT_TRUE(matches_torch("F.binary_cross_entropy(a, b)", {make({1.5, 0.5}), make({1.0, 0.0})},
                            [](const V& x) { return binary_cross_entropy(x[0], x[1]); }));
  EXPECT_TRUE(
      matches_torch("F.binary_cross_entropy_with_logits(a, b)", {uniform({2, 3}), uniform({3})},
                    [](const V& x) { return binary_cross_entropy_with_logits(x[0], x[1]); }));
}

TEST(CrossEntropyProbabilities, MatchesTorch) {
  TorchOptions probs;
  probs.low = 0.0;
  const std::vector<std::vector<Shape>> cases{
      {{3, 5}, {3, 5}}, {{2, 4, 3, 2}, {2, 4, 3, 2}}, {{5}, {5}}, {{0, 4}, {0, 4}}};
  for (const std::string& r : kReductions) {
    for (double smoothing : {0.0, 0.25}) {
      const std::string s = std::to_string(smoothing);
      EXPECT_TRUE(sweep_torch(
          "F.cross_entropy(a, b, reduction='" + r + "', label_smoothing=" + s + ")", cases,
          [r, smoothing](const V& x) { return cross_entropy(x[0], x[1], {}, -100, r, smoothing); },
          probs));
    }
    EXPECT_TRUE(sweep_torch(
        "F.cross_entropy(a, b, weight=c, reduction='" + r + "', label_smoothing=0.1)",
        {{{3, 5}, {3, 5}, {5}}, {{2, 4, 3}, {2, 4, 3}, {4}}, {{5}, {5}, {5}}},
        [r](const V& x) { return cross_entropy(x[0], x[1], x[2], -100, r, 0.1); }, probs));
  }
  EXPECT_TRUE(matches_torch("F.cross_entropy(a, b)", {uniform({3, 4}), uniform({3, 5})},
                            [](const V& x) { return cross_entropy(x[0], x[1]); }));
}

TEST(CrossEntropyProbabilities, OneHotProbabilitiesEqualClassIndices) {
  Tensor logits = uniform({4, 3});
  Tensor labels = tensor<int64_t>({2, 0, 1, 1});
  Tensor hot = cast(eq(labels.unsqueeze(1), arange(3).reshape({1, 3})), DType::f64);
  Tensor w = make({0.5, 2.0, 1.0});
  for (double smoothing : {0.0, 0.3}) {
    EXPECT_TRUE(all_close(cross_entropy(logits, hot, w, -100, "sum", smoothing),
                          cross_entropy(logits, labels, w, -100, "sum", smoothing), 1e-12, 1e-12));
  }
}

}  // namespace
}  // namespace tessera::testing
