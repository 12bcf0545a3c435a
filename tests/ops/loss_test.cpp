#include <cmath>

#include "testing.h"

namespace tessera::testing {
namespace {

Tensor labels(const std::vector<int64_t>& values, Shape shape = {}) {
  if (shape.empty()) shape = {static_cast<int64_t>(values.size())};
  return Tensor::from_vector(values, shape);
}

struct Expected {
  std::vector<double> per_sample;
  double sum = 0;
  double mean = 0;
};

// torch's cross_entropy by its definition, with loops in double:
// loss = (1 - e) * (-w_t logp_t) + e / C * (-sum_c w_c logp_c), 0 for ignored
// samples; "mean" divides the sum by the summed w_t of counted samples.
Expected reference(const Tensor& logits, const Tensor& target, const Tensor& weight,
                   int64_t ignore_index, double smoothing) {
  const int64_t n = logits.shape()[0], classes = logits.shape()[1];
  const int64_t inner = logits.numel() / (n * classes);
  std::vector<double> x = logits.to_vector<double>();
  std::vector<int64_t> t = target.to_vector<int64_t>();
  std::vector<double> w =
      weight.defined() ? weight.to_vector<double>() : std::vector<double>(classes, 1.0);
  Expected out;
  double divisor = 0;
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j < inner; ++j) {
      const int64_t label = t[i * inner + j];
      if (label == ignore_index) {
        out.per_sample.push_back(0.0);
        continue;
      }
      auto at = [&](int64_t c) { return x[(i * classes + c) * inner + j]; };
      double m = -INFINITY, total = 0;
      for (int64_t c = 0; c < classes; ++c) m = std::max(m, at(c));
      for (int64_t c = 0; c < classes; ++c) total += std::exp(at(c) - m);
      const double lse = m + std::log(total);
      double loss = (1 - smoothing) * -w[label] * (at(label) - lse);
      if (smoothing > 0) {
        double smooth = 0;
        for (int64_t c = 0; c < classes; ++c) smooth -= w[c] * (at(c) - lse);
        loss += smoothing / classes * smooth;
      }
      out.per_sample.push_back(loss);
      out.sum += loss;
      divisor += w[label];
    }
  }
  out.mean = out.sum / divisor;
  return out;
}

TEST(CrossEntropy, HandValuesFromPyTorch) {
  // torch.nn.functional.cross_entropy on these inputs (float64).
  Tensor x = make({1.0, 2.0, 0.5, -1.0, 0.3, -0.2, 2.2, 0.0, -1.5, 0.5, 0.25, 1.0}, {3, 4});
  Tensor t = labels({1, 3, -100});
  Tensor w = make({0.5, 2.0, 1.0, 1.5});
  EXPECT_TRUE(all_close(cross_entropy(x, t), {1.498046686487}, 1e-11, 0));
  EXPECT_TRUE(all_close(cross_entropy(x, t, w), {1.354780288144}, 1e-11, 0));
  EXPECT_TRUE(all_close(cross_entropy(x, t, w, -100, "mean", 0.2), {1.362830900013}, 1e-11, 0));
  EXPECT_TRUE(all_close(cross_entropy(x, t, {}, -100, "mean", 0.2), {1.578046686487}, 1e-11, 0));
  EXPECT_TRUE(all_close(cross_entropy(x, t, w, -100, "sum", 0.2), {4.769908150047}, 1e-11, 0));
  EXPECT_TRUE(all_close(cross_entropy(x, t, {}, -100, "sum"), {2.996093372974}, 1e-11, 0));
  EXPECT_TRUE(all_close(cross_entropy(x, t, w, -100, "none", 0.2),
                        {1.241086511459, 3.528821638588, 0.0}, 1e-11, 1e-12));
  EXPECT_TRUE(all_close(cross_entropy(x, t, {}, -100, "none"),
                        {0.495181898086, 2.500911474888, 0.0}, 1e-11, 1e-12));
  // ignore_index inside the class range.
  EXPECT_TRUE(all_close(cross_entropy(x, labels({1, 1, 2}), w, 1, "mean", 0.1), {1.539826916832},
                        1e-11, 0));
  // Spatial [N, C, d] logits.
  Tensor x3 = sin(arange(0, 24, 1, DType::f64)).reshape({2, 4, 3});
  Tensor t3 = labels({0, 3, -100, 2, 1, 1}, {2, 3});
  EXPECT_TRUE(all_close(
      cross_entropy(x3, t3, w, -100, "none", 0.3),
      {1.030515457732, 3.041146605705, 0.0, 2.199470064834, 3.060125211934, 4.658910337175}, 1e-11,
      1e-12));
  EXPECT_TRUE(all_close(cross_entropy(x3, t3, w, -100, "mean", 0.3), {1.998595382483}, 1e-11, 0));
  // Unbatched [C] logits with a 0-d target.
  Tensor row = make({1.0, 2.0, 0.5, -1.0});
  EXPECT_TRUE(all_close(cross_entropy(row, Tensor::from_vector<int64_t>({2}, {})), {1.995181898086},
                        1e-11, 0));
  EXPECT_EQ(cross_entropy(row, Tensor::from_vector<int64_t>({2}, {}), {}, -100, "none").dim(), 0);
}

TEST(CrossEntropy, EveryOptionCombinationAgainstLoops) {
  Tensor logits = uniform({6, 5}, -3, 3, 1);
  Tensor weight = uniform({5}, 0.2, 2.0, 2);
  Tensor spatial = uniform({3, 5, 2, 2}, -3, 3, 3);
  for (bool weighted : {false, true}) {
    for (double smoothing : {0.0, 0.25, 1.0}) {
      for (int64_t ignore : {int64_t{-100}, int64_t{2}}) {
        SCOPED_TRACE(::testing::Message() << "weighted " << weighted << " smoothing " << smoothing
                                          << " ignore " << ignore);
        const int64_t i = ignore;
        Tensor target = labels({4, 0, i, 2, 2, 1});
        Tensor spatial_target = labels({0, 1, 2, 3, 4, i, 4, 0, 1, 1, 3, 2}, {3, 2, 2});
        Tensor w = weighted ? weight : Tensor();
        for (auto [x, t] : {std::pair{logits, target}, std::pair{spatial, spatial_target}}) {
          Expected want = reference(x, t, w, ignore, smoothing);
          EXPECT_TRUE(all_close(cross_entropy(x, t, w, ignore, "none", smoothing), want.per_sample,
                                1e-12, 1e-12));
          EXPECT_TRUE(all_close(cross_entropy(x, t, w, ignore, "sum", smoothing), {want.sum}, 1e-12,
                                1e-12));
          EXPECT_TRUE(all_close(cross_entropy(x, t, w, ignore, "mean", smoothing), {want.mean},
                                1e-12, 1e-12));
          Tensor w32 = weighted ? weight.to(DType::f32) : Tensor();
          Tensor got = cross_entropy(x.to(DType::f32), t, w32, ignore, "mean", smoothing);
          EXPECT_EQ(got.dtype(), DType::f32);
          EXPECT_TRUE(all_close(got, {want.mean}, 2e-6, 1e-6));
        }
      }
    }
  }
}

TEST(CrossEntropy, LongRowsStridedLogitsAndExtremes) {
  // 1500 classes: vector body, tail and more than one summation block.
  Tensor x = uniform({4, 1500}, -10, 10, 4);
  Tensor t = labels({0, 1499, 700, 3});
  Expected want = reference(x, t, {}, -100, 0.1);
  EXPECT_TRUE(all_close(cross_entropy(x.to(DType::f32), t, {}, -100, "none", 0.1), want.per_sample,
                        2e-6, 2e-6));
  // Transposed logits: [5, 3] viewed from a [3, 5] buffer.
  Tensor base = uniform({5, 3}, -2, 2, 5);
  Tensor transposed = base.t();
  Tensor tt = labels({4, 0, 2});
  EXPECT_TRUE(all_close(cross_entropy(transposed, tt, {}, -100, "none"),
                        reference(transposed.contiguous(), tt, {}, -100, 0).per_sample, 1e-12,
                        1e-12));
  // Huge logits stay finite; a -inf logit of another class is harmless.
  Tensor big = make({1000.0, 0.0, -INFINITY, 999.0, 1001.0, 0.0}, {2, 3});
  Expected big_want = reference(big, labels({0, 1}), {}, -100, 0);
  EXPECT_TRUE(all_close(cross_entropy(big, labels({0, 1}), {}, -100, "none"), big_want.per_sample,
                        1e-12, 1e-9));
  EXPECT_TRUE(all_close(cross_entropy(big.to(DType::f32), labels({0, 1}), {}, -100, "none"),
                        big_want.per_sample, 1e-6, 1e-4));
}

TEST(CrossEntropy, EmptyAndAllIgnored) {
  Tensor x = uniform({3, 4}, -1, 1, 6);
  EXPECT_TRUE(all_close(cross_entropy(x, labels({-100, -100, -100})), {NAN}));
  EXPECT_TRUE(all_close(cross_entropy(x, labels({-100, -100, -100}), {}, -100, "sum"), {0.0}));
  Tensor empty = zeros({0, 4}, DType::f64);
  Tensor no_labels = Tensor::from_vector<int64_t>({}, {0});
  EXPECT_TRUE(all_close(cross_entropy(empty, no_labels), {NAN}));
  EXPECT_TRUE(all_close(cross_entropy(empty, no_labels, {}, -100, "sum"), {0.0}));
  EXPECT_EQ(cross_entropy(empty, no_labels, {}, -100, "none").shape(), (Shape{0}));
}

TEST(CrossEntropy, Gradients) {
  Tensor x = uniform({4, 3}, -2, 2, 7).set_requires_grad();
  Tensor t = labels({2, -100, 0, 1});
  Tensor w = uniform({3}, 0.5, 2.0, 8);
  for (const char* reduction : {"mean", "sum", "none"}) {
    for (double smoothing : {0.0, 0.3}) {
      for (bool weighted : {false, true}) {
        SCOPED_TRACE(::testing::Message()
                     << reduction << " smoothing " << smoothing << " weighted " << weighted);
        Tensor wt = weighted ? w : Tensor();
        auto f = [=](const std::vector<Tensor>& in) {
          return cross_entropy(in[0], t, wt, -100, reduction, smoothing);
        };
        EXPECT_TRUE(gradcheck(f, {x}));
        EXPECT_TRUE(gradgradcheck(f, {x}));
      }
    }
  }
  Tensor x3 = uniform({2, 3, 2}, -2, 2, 9).set_requires_grad();
  Tensor t3 = labels({0, 2, -100, 1}, {2, 2});
  auto spatial = [=](const std::vector<Tensor>& in) {
    return cross_entropy(in[0], t3, w, -100, "none", 0.2);
  };
  EXPECT_TRUE(gradcheck(spatial, {x3}));
  EXPECT_TRUE(gradgradcheck(spatial, {x3}));
  // Through a transposed (strided) view of the logits.
  Tensor base = uniform({3, 4}, -2, 2, 10).set_requires_grad();
  EXPECT_TRUE(gradcheck(
      [=](const std::vector<Tensor>& in) { return cross_entropy(in[0].t(), t, {}, -100, "sum"); },
      {base}));
}

TEST(CrossEntropyBackward, AgainstLoopsAndAsAnOp) {
  // dlogits = scale * (softmax * A - B), B = w * ((1 - e) onehot + e / C).
  Tensor x = uniform({3, 4, 2}, -2, 2, 20);
  Tensor t = labels({0, 3, -100, 1, 2, 2}, {3, 2});
  Tensor w = uniform({4}, 0.5, 2.0, 21);
  const double e = 0.3;
  std::vector<double> xv = x.to_vector<double>(), wv = w.to_vector<double>();
  std::vector<int64_t> tv = t.to_vector<int64_t>();
  double divisor = 0;
  for (int64_t label : tv) divisor += label == -100 ? 0 : wv[label];
  std::vector<double> want(xv.size(), 0.0);
  for (int64_t n = 0; n < 3; ++n) {
    for (int64_t j = 0; j < 2; ++j) {
      const int64_t label = tv[n * 2 + j];
      if (label == -100) continue;
      auto at = [&](int64_t c) { return (n * 4 + c) * 2 + j; };
      double total = 0, a = 0;
      for (int64_t c = 0; c < 4; ++c) total += std::exp(xv[at(c)]);
      std::vector<double> b(4);
      for (int64_t c = 0; c < 4; ++c) {
        b[c] = wv[c] * ((1 - e) * (c == label) + e / 4);
        a += b[c];
      }
      for (int64_t c = 0; c < 4; ++c) {
        want[at(c)] = 0.7 * (std::exp(xv[at(c)]) / total * a - b[c]) / divisor;
      }
    }
  }
  Attrs attrs{{"ignore_index", int64_t{-100}},
              {"reduction", std::string("mean")},
              {"label_smoothing", e},
              {"has_weight", true}};
  const OpDef& op = find_op("cross_entropy_backward");
  for (DType dtype : {DType::f64, DType::f32}) {
    Tensor got = call1(op, {make({0.7}, {}, dtype), x.to(dtype), t, w.to(dtype)}, attrs);
    EXPECT_TRUE(all_close(got, want, dtype == DType::f64 ? 1e-12 : 2e-6, 1e-7));
  }
  // The op's own gradient, with respect to the upstream gradient and logits.
  Tensor g = make({0.7}, {}).set_requires_grad();
  Tensor xr = x.detach().set_requires_grad();
  auto f = [&](const std::vector<Tensor>& in) { return call1(op, {in[0], in[1], t, w}, attrs); };
  EXPECT_TRUE(gradcheck(f, {g, xr}));
  EXPECT_TRUE(gradgradcheck(f, {g, xr}));
  Attrs none = attrs;
  none.set("reduction", std::string("none"));
  Tensor per_sample = uniform({3, 2}, 0.5, 1.5, 22).set_requires_grad();
  auto f_none = [&](const std::vector<Tensor>& in) {
    return call1(op, {in[0], in[1], t, w}, none);
  };
  EXPECT_TRUE(gradcheck(f_none, {per_sample, xr}));
}

TEST(CrossEntropy, GradientIsSoftmaxMinusOneHot) {
  Tensor x = make({0.5, -0.5, 1.5, 0.0}, {2, 2}).set_requires_grad();
  cross_entropy(x, labels({1, 0}), {}, -100, "sum").backward();
  auto p = [](double a, double b) { return std::exp(a) / (std::exp(a) + std::exp(b)); };
  EXPECT_TRUE(all_close(x.grad(), {p(0.5, -0.5), p(-0.5, 0.5) - 1, p(1.5, 0.0) - 1, p(0.0, 1.5)},
                        1e-12, 1e-14));
}

TEST(CrossEntropy, OutOfRangeTargetsAndBadArguments) {
  Tensor x = zeros({3, 5});
  for (int64_t bad : {int64_t{5}, int64_t{-1}}) {
    try {
      cross_entropy(x, labels({1, bad, 0}));
      FAIL() << "expected an error";
    } catch (const Error& error) {
      std::string message = error.what();
      EXPECT_NE(message.find("[cross_entropy]"), std::string::npos) << message;
      EXPECT_NE(message.find("target " + std::to_string(bad)), std::string::npos) << message;
      EXPECT_NE(message.find("0..4"), std::string::npos) << message;
    }
  }
  try {
    cross_entropy(x, labels({1, 2}));
    FAIL() << "expected an error";
  } catch (const Error& error) {
    std::string message = error.what();
    EXPECT_NE(message.find("[cross_entropy]"), std::string::npos) << message;
    EXPECT_NE(message.find("[2]"), std::string::npos) << message;
    EXPECT_NE(message.find("[3, 5]"), std::string::npos) << message;
  }
  EXPECT_THROW(cross_entropy(x, zeros({3})), Error);                          // float target
  EXPECT_THROW(cross_entropy(x, labels({0, 1, 2}), zeros({4})), Error);       // weight shape
  EXPECT_THROW(cross_entropy(x, labels({0, 1, 2}), {}, -100, "avg"), Error);  // reduction
  EXPECT_THROW(cross_entropy(x, labels({0, 1, 2}), {}, -100, "mean", 1.5), Error);
  // Integer targets of other widths are accepted.
  Tensor t32 = labels({0, 1, 2}).to(DType::i32);
  EXPECT_TRUE(all_close(cross_entropy(x, t32), {std::log(5.0)}, 1e-6, 0));
}

TEST(NllLoss, MatchesCrossEntropyOfLogSoftmax) {
  Tensor x = uniform({5, 4}, -2, 2, 10);
  Tensor t = labels({3, -100, 0, 1, 1});
  Tensor w = uniform({4}, 0.5, 2.0, 11);
  for (const char* reduction : {"mean", "sum", "none"}) {
    SCOPED_TRACE(reduction);
    Expected want = reference(x, t, w, -100, 0);
    Tensor got = nll_loss(log_softmax(x, 1), t, w, -100, reduction);
    std::string r = reduction;
    std::vector<double> expected = r == "none"  ? want.per_sample
                                   : r == "sum" ? std::vector<double>{want.sum}
                                                : std::vector<double>{want.mean};
    EXPECT_TRUE(all_close(got, expected, 1e-12, 1e-12));
  }
  // Plain values: -mean of the picked entries.
  Tensor lp = make({-0.1, -2.0, -3.0, -0.5}, {2, 2});
  EXPECT_TRUE(all_close(nll_loss(lp, labels({1, 0})), {(2.0 + 3.0) / 2}));
  // -inf at a non-target class does not poison the result.
  Tensor with_inf = make({-INFINITY, -0.5, -0.2, -INFINITY}, {2, 2});
  EXPECT_TRUE(all_close(nll_loss(with_inf, labels({1, 0}), {}, -100, "none"), {0.5, 0.2}));
  Tensor spatial = uniform({2, 3, 2}, -2, 2, 12);
  Tensor st = labels({0, 2, 1, -100}, {2, 2});
  EXPECT_TRUE(all_close(nll_loss(log_softmax(spatial, 1), st, {}, -100, "none"),
                        reference(spatial, st, {}, -100, 0).per_sample, 1e-12, 1e-12));
}

TEST(NllLoss, GradientsAndErrors) {
  Tensor x = uniform({4, 3}, -2, -0.1, 13).set_requires_grad();
  Tensor t = labels({2, -100, 0, 1});
  Tensor w = uniform({3}, 0.5, 2.0, 14);
  for (const char* reduction : {"mean", "sum", "none"}) {
    auto f = [=](const std::vector<Tensor>& in) { return nll_loss(in[0], t, w, -100, reduction); };
    EXPECT_TRUE(gradcheck(f, {x}));
  }
  try {
    nll_loss(x, labels({0, 3, 1, 1}));
    FAIL() << "expected an error";
  } catch (const Error& error) {
    std::string message = error.what();
    EXPECT_NE(message.find("[nll_loss]"), std::string::npos) << message;
    EXPECT_NE(message.find("target 3"), std::string::npos) << message;
  }
}

TEST(MseLoss, ValuesGradientsAndErrors) {
  Tensor a = make({1.0, 2.0, 3.0});
  Tensor b = make({1.5, 2.0, 1.0});
  EXPECT_TRUE(all_close(mse_loss(a, b), {(0.25 + 0 + 4) / 3}));
  EXPECT_TRUE(all_close(mse_loss(a, b, "sum"), {4.25}));
  EXPECT_TRUE(all_close(mse_loss(a, b, "none"), {0.25, 0, 4}));
  Tensor x = uniform({2, 3}, -1, 1, 15).set_requires_grad();
  Tensor y = uniform({3}, -1, 1, 16).set_requires_grad();
  EXPECT_TRUE(
      gradcheck([](const std::vector<Tensor>& in) { return mse_loss(in[0], in[1]); }, {x, y}));
  EXPECT_TRUE(
      gradgradcheck([](const std::vector<Tensor>& in) { return mse_loss(in[0], in[1]); }, {x, y}));
  EXPECT_THROW(mse_loss(a, b, "max"), Error);
  EXPECT_THROW(mse_loss(a, zeros({2})), Error);
}

Attrs ce_attrs(const char* reduction, bool weighted, double smoothing) {
  return {{"ignore_index", int64_t{-100}},
          {"reduction", std::string(reduction)},
          {"label_smoothing", smoothing},
          {"has_weight", weighted}};
}

TESSERA_SBP_CASE(
    "cross_entropy",
    [] {
      return std::vector<Tensor>{uniform({7, 5}, -2, 2, 30), labels({0, 4, -100, 2, 3, 1, 1}),
                                 uniform({5}, 0.5, 2, 31)};
    },
    ce_attrs("none", true, 0.1));
TESSERA_SBP_CASE(
    "cross_entropy",
    [] {
      return std::vector<Tensor>{uniform({7, 5}, -2, 2, 32), labels({0, 4, -100, 2, 3, 1, 1})};
    },
    ce_attrs("sum", false, 0.2));
TESSERA_SBP_CASE(
    "cross_entropy",
    [] {
      return std::vector<Tensor>{
          uniform({4, 3, 5}, -2, 2, 33),
          labels({0, 1, 2, 2, 1, 0, -100, 1, 2, 0, 0, 1, 2, 2, 1, 0, 1, 2, 0, 1}, {4, 5}),
          uniform({3}, 0.5, 2, 34)};
    },
    ce_attrs("sum", true, 0.0));
TESSERA_SBP_CASE(
    "cross_entropy",
    [] {
      return std::vector<Tensor>{uniform({5, 3}, -2, 2, 35), labels({0, 1, 2, 2, 1})};
    },
    ce_attrs("mean", false, 0.0));

TESSERA_SBP_CASE(
    "cross_entropy_backward",
    [] {
      return std::vector<Tensor>{uniform({7}, 0.5, 1.5, 36), uniform({7, 5}, -2, 2, 37),
                                 labels({0, 4, -100, 2, 3, 1, 1}), uniform({5}, 0.5, 2, 38)};
    },
    ce_attrs("none", true, 0.1));
TESSERA_SBP_CASE(
    "cross_entropy_backward",
    [] {
      return std::vector<Tensor>{
          make({0.8}, {}), uniform({4, 3, 5}, -2, 2, 39),
          labels({0, 1, 2, 2, 1, 0, -100, 1, 2, 0, 0, 1, 2, 2, 1, 0, 1, 2, 0, 1}, {4, 5})};
    },
    ce_attrs("sum", false, 0.2));
TESSERA_SBP_CASE(
    "cross_entropy_backward",
    [] {
      return std::vector<Tensor>{make({1.3}, {}), uniform({6, 4}, -2, 2, 40),
                                 labels({0, 1, 3, -100, 2, 2}), uniform({4}, 0.5, 2, 41)};
    },
    ce_attrs("mean", true, 0.1));

}  // namespace
}  // namespace tessera::testing
