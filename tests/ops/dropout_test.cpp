#include <cmath>

#include "testing.h"

namespace tessera::testing {
namespace {

TEST(Dropout, EvalAndZeroProbabilityReturnInput) {
  Tensor x = uniform({3, 4});
  EXPECT_TRUE(dropout(x, 0.5, false).is_same(x));
  EXPECT_TRUE(dropout(x, 0.0).is_same(x));
}

TEST(Dropout, ProbabilityOneGivesZerosAndZeroGradient) {
  Tensor x = uniform({3, 4}).set_requires_grad();
  Tensor y = dropout(x, 1.0);
  EXPECT_TRUE(all_close(y, std::vector<double>(12, 0.0)));
  sum(y).backward();
  EXPECT_TRUE(all_close(x.grad(), std::vector<double>(12, 0.0)));
}

TEST(Dropout, KeepsAboutOneMinusPAndScalesKeptValues) {
  for (DType dtype : {DType::f32, DType::f64}) {
    for (double p : {0.1, 0.5, 0.9}) {
      SCOPED_TRACE(std::string(dtype_name(dtype)) + " p=" + std::to_string(p));
      Tensor x = uniform({200, 501}, 0.5, 1.5, 3, dtype);
      Generator gen(11);
      Tensor y = dropout(x, p, true, &gen);
      EXPECT_EQ(y.dtype(), dtype);
      std::vector<double> vx = x.to_vector<double>(), vy = y.to_vector<double>();
      int64_t dropped = 0;
      bool scaled = true;
      for (size_t i = 0; i < vx.size(); ++i) {
        if (vy[i] == 0) {
          ++dropped;
        } else if (std::abs(vy[i] - vx[i] / (1 - p)) > 1e-5 * std::abs(vy[i])) {
          scaled = false;
        }
      }
      double fraction = static_cast<double>(dropped) / vx.size();
      // 100k Bernoulli draws: the standard deviation is below 0.0016.
      EXPECT_NEAR(fraction, p, 0.01);
      EXPECT_TRUE(scaled);
    }
  }
}

TEST(Dropout, MaskDependsOnlyOnSeedOffsetAndIndex) {
  Tensor big = ones({1000}, DType::f64);
  Generator a(5), b(5);
  std::vector<double> long_mask = dropout(big, 0.5, true, &a).to_vector<double>();
  std::vector<double> short_mask =
      dropout(big.narrow(0, 0, 601), 0.5, true, &b).to_vector<double>();
  for (size_t i = 0; i < short_mask.size(); ++i) ASSERT_EQ(short_mask[i], long_mask[i]) << i;
  // A generator advances between calls, so the next mask differs; a reseeded one repeats.
  EXPECT_NE(dropout(big, 0.5, true, &a).to_vector<double>(), long_mask);
  a.set_state(5, 0);
  EXPECT_EQ(dropout(big, 0.5, true, &a).to_vector<double>(), long_mask);
  // The default generator follows manual_seed.
  manual_seed(3);
  std::vector<double> first = dropout(big, 0.5).to_vector<double>();
  manual_seed(3);
  EXPECT_EQ(dropout(big, 0.5).to_vector<double>(), first);
}

TEST(Dropout, StridedInputUsesLogicalOrder) {
  Tensor x = uniform({6, 7}).t();
  EXPECT_FALSE(x.is_contiguous());
  Generator a(9), b(9);
  EXPECT_TRUE(all_close(dropout(x, 0.3, true, &a), dropout(x.contiguous(), 0.3, true, &b), 0, 0));
}

TEST(Dropout, GradientReusesTheMask) {
  Tensor x = uniform({50, 40}, 0.5, 1.5, 2).set_requires_grad();
  Generator gen(4);
  Tensor y = dropout(x, 0.4, true, &gen);
  Tensor g = uniform({50, 40}, -1, 1, 5);
  y.backward(g);
  std::vector<double> vy = y.to_vector<double>(), vg = g.to_vector<double>();
  std::vector<double> want;
  for (size_t i = 0; i < vy.size(); ++i) want.push_back(vy[i] == 0 ? 0.0 : vg[i] / 0.6);
  EXPECT_TRUE(all_close(x.grad(), want, 1e-12, 1e-12));
}

TEST(Dropout, GradientsMatchFiniteDifferences) {
  // A fixed generator state per call, so every evaluation uses the same mask.
  auto fn = [](const std::vector<Tensor>& in) {
    Generator gen(21);
    Tensor y = dropout(in[0], 0.35, true, &gen);
    return mul(y, y);
  };
  Tensor x = uniform({4, 6}).set_requires_grad();
  EXPECT_TRUE(gradcheck(fn, {x}));
  EXPECT_TRUE(gradgradcheck(fn, {x}));
}

TEST(Dropout, ErrorsNameOpAndValues) {
  try {
    dropout(zeros({2, 3}), 1.5);
    FAIL() << "expected an error";
  } catch (const Error& error) {
    std::string message = error.what();
    EXPECT_NE(message.find("[dropout]"), std::string::npos) << message;
    EXPECT_NE(message.find("1.5"), std::string::npos) << message;
  }
  try {
    dropout(zeros({2, 3}, DType::i64), 0.5);
    FAIL() << "expected an error";
  } catch (const Error& error) {
    std::string message = error.what();
    EXPECT_NE(message.find("[dropout] needs a floating tensor, got i64"), std::string::npos)
        << message;
    EXPECT_NE(message.find("[2, 3]"), std::string::npos) << message;
  }
  EXPECT_THROW(dropout(zeros({2}), -0.1), Error);
}

Attrs dropout_attrs(const Shape& shape, double p, int64_t seed, int64_t offset) {
  return {{"p", p},
          {"seed", seed},
          {"offset", offset},
          {"logical_shape", shape},
          {"shard_start", std::vector<int64_t>(shape.size(), 0)}};
}

TESSERA_SBP_CASE("dropout", [] { return std::vector<Tensor>{uniform({7, 9}, -1, 1, 1)}; },
                 dropout_attrs({7, 9}, 0.5, 3, 8));
TESSERA_SBP_CASE("dropout", [] { return std::vector<Tensor>{uniform({3, 5, 4}, -1, 1, 2)}; },
                 dropout_attrs({3, 5, 4}, 0.25, 17, 0));

}  // namespace
}  // namespace tessera::testing
