#include <cmath>

#include "testing.h"

namespace tessera::testing {
namespace {

// Checks a module's gradients against central finite differences in f64:
// the input's through gradcheck, each parameter's by perturbing the
// parameter in place (gradcheck cannot reach tensors the module owns).
::testing::AssertionResult module_gradcheck(nn::Module& module, const Tensor& input) {
  module.to(DType::f64);
  Tensor x = input.to(DType::f64).detach();
  ::testing::AssertionResult input_check = gradcheck(
      [&](const std::vector<Tensor>& v) { return module.forward(v[0]); },
      {x.clone().set_requires_grad()});
  if (!input_check || module.parameters().empty()) return input_check;
  Tensor weights;
  auto objective = [&]() {
    Tensor out = module.forward(x);
    if (!weights.defined()) weights = uniform(out.shape(), 0.5, 1.5, 7);
    return sum(out * weights);
  };
  module.zero_grad();
  Tensor total = objective();
  if (!total.requires_grad()) return ::testing::AssertionFailure() << "objective has no grad_fn";
  total.backward();
  const double eps = 1e-6;
  for (auto& [name, param] : module.named_parameters()) {
    std::vector<double> analytic = param.grad().to_vector<double>();
    double* data = param.data<double>();
    for (int64_t e = 0; e < param.numel(); ++e) {
      NoGradGuard no_grad;
      const double saved = data[e];
      data[e] = saved + eps;
      const double plus = objective().item<double>();
      data[e] = saved - eps;
      const double minus = objective().item<double>();
      data[e] = saved;
      const double numeric = (plus - minus) / (2 * eps);
      if (std::abs(numeric - analytic[e]) > 1e-6 + 1e-4 * std::abs(numeric))
        return ::testing::AssertionFailure() << module.type_name() << " parameter " << name
                                             << " element " << e << ": autograd " << analytic[e]
                                             << ", finite difference " << numeric;
    }
  }
  return ::testing::AssertionSuccess();
}

TEST(Linear, MatchesMatmulAndInitBound) {
  manual_seed(3);
  nn::Linear linear(5, 4);
  EXPECT_EQ(linear.weight.shape(), (Shape{4, 5}));
  const double bound = 1.0 / std::sqrt(5.0);
  EXPECT_LE(max(abs(linear.weight)).item<double>(), bound);
  EXPECT_LE(max(abs(linear.bias)).item<double>(), bound);
  Tensor x = randn({2, 3, 5});
  std::vector<double> w = linear.weight.to_vector<double>(), b = linear.bias.to_vector<double>();
  std::vector<double> xs = x.to_vector<double>(), expected;
  for (int64_t row = 0; row < 6; ++row)
    for (int64_t o = 0; o < 4; ++o) {
      double acc = b[o];
      for (int64_t i = 0; i < 5; ++i) acc += xs[row * 5 + i] * w[o * 5 + i];
      expected.push_back(acc);
    }
  Tensor y = linear(x);
  EXPECT_EQ(y.shape(), (Shape{2, 3, 4}));
  EXPECT_TRUE(all_close(y, expected, 1e-5, 1e-5));
  EXPECT_HAS(error_of([&] { linear(randn({2, 6})); }), "[Linear] expected input with last dim 5");
  EXPECT_HAS(error_of([] { nn::Linear(0, 3); }), "[Linear]");
}

TEST(Layers, GradientsMatchFiniteDifferences) {
  manual_seed(4);
  nn::Linear linear(3, 2);
  EXPECT_TRUE(module_gradcheck(linear, randn({4, 3})));
  nn::Conv2d conv(2, 3, 3, /*stride=*/1, /*padding=*/1);
  EXPECT_TRUE(module_gradcheck(conv, randn({2, 2, 4, 4})));
  nn::LayerNorm norm(Shape{4});
  EXPECT_TRUE(module_gradcheck(norm, randn({3, 4})));
  nn::RMSNorm rms(Shape{4});
  EXPECT_TRUE(module_gradcheck(rms, randn({3, 4})));
  nn::BatchNorm2d batch_norm(2);
  EXPECT_TRUE(module_gradcheck(batch_norm, randn({3, 2, 2, 2})));
  nn::AdaptiveAvgPool2d adaptive(std::vector<int64_t>{2, 3});
  EXPECT_TRUE(module_gradcheck(adaptive, randn({1, 2, 5, 7})));
}

TEST(Conv2d, ShapesAndErrors) {
  nn::Conv2d conv(1, 8, 3, /*stride=*/2, /*padding=*/1);
  EXPECT_EQ(conv.weight.shape(), (Shape{8, 1, 3, 3}));
  EXPECT_EQ(conv(randn({2, 1, 28, 28})).shape(), (Shape{2, 8, 14, 14}));
  EXPECT_HAS(error_of([] { nn::Conv2d(3, 4, 3, 1, 0, 1, /*groups=*/2); }), "groups");
  nn::Conv2d grouped(4, 6, 1, 1, 0, 1, /*groups=*/2, /*bias=*/false);
  EXPECT_EQ(grouped.weight.shape(), (Shape{6, 2, 1, 1}));
  EXPECT_FALSE(grouped.bias.defined());
  EXPECT_HAS(grouped.extra_repr(), "groups=2");
}

TEST(BatchNorm, TrainingUsesBatchStatsAndUpdatesRunningStats) {
  nn::BatchNorm1d norm(2, 1e-5, /*momentum=*/0.5);
  Tensor x = make({1, 10, 2, 20, 3, 30, 6, 40}, {4, 2}, DType::f32);
  Tensor y = norm(x);
  // Column 0: values 1 2 3 6, mean 3, biased var 3.5, unbiased 14/3.
  const double s0 = std::sqrt(3.5 + 1e-5);
  EXPECT_TRUE(all_close(y.select(1, 0), {-2 / s0, -1 / s0, 0, 3 / s0}, 1e-5, 1e-6));
  EXPECT_TRUE(all_close(norm.running_mean, {0.5 * 3, 0.5 * 25}, 1e-6, 1e-6));
  EXPECT_TRUE(all_close(norm.running_var, {0.5 + 0.5 * 14.0 / 3.0, 0.5 + 0.5 * 500.0 / 3.0},
                        1e-5, 1e-5));
  EXPECT_EQ(norm.num_batches_tracked.item<int64_t>(), 1);
  norm.eval();
  Tensor z = norm(make({3, 25}, {1, 2}, DType::f32));
  EXPECT_TRUE(all_close(z, {(3 - 1.5) / std::sqrt(norm.running_var.to_vector<double>()[0] + 1e-5),
                            (25 - 12.5) / std::sqrt(norm.running_var.to_vector<double>()[1] + 1e-5)},
                        1e-5, 1e-6));
  EXPECT_EQ(norm.num_batches_tracked.item<int64_t>(), 1);  // eval does not count
  norm.train();
  EXPECT_HAS(error_of([&] { norm(randn({1, 2})); }), "more than 1 value per channel");
  EXPECT_HAS(error_of([&] { norm(randn({4, 3})); }), "C = 2");
  nn::BatchNorm2d norm2d(3);
  EXPECT_HAS(error_of([&] { norm2d(randn({4, 3})); }), "[BatchNorm2d]");
}

TEST(Embedding, LooksUpRowsAndKeepsPaddingRowAtZero) {
  nn::Embedding embedding(10, 3, /*padding_idx=*/0);
  EXPECT_TRUE(all_close(embedding.weight.select(0, 0), {0, 0, 0}, 0, 0));
  Tensor indices = Tensor::from_vector<int64_t>({4, 0, 9, 4}, {2, 2});
  Tensor out = embedding(indices);
  EXPECT_EQ(out.shape(), (Shape{2, 2, 3}));
  EXPECT_TRUE(all_close(out.select(0, 0).select(0, 0), embedding.weight.select(0, 4), 0, 0));
  sum(out).backward();
  Tensor grad = embedding.weight.grad();
  EXPECT_TRUE(all_close(grad.select(0, 4), {2, 2, 2}, 0, 0));
  EXPECT_TRUE(all_close(grad.select(0, 0), {0, 0, 0}, 0, 0));
  EXPECT_HAS(error_of([] { nn::Embedding(4, 2, 4); }), "padding_idx");
}

TEST(Dropout, IdentityInEvalAndScaledInTraining) {
  nn::Dropout dropout(0.25);
  Tensor x = ones({1000});
  Tensor y = dropout(x);
  std::vector<float> values = y.to_vector<float>();
  int64_t zeros_seen = 0;
  for (float v : values) {
    EXPECT_TRUE(v == 0.0f || std::abs(v - 1.0f / 0.75f) < 1e-6f);
    zeros_seen += v == 0.0f;
  }
  EXPECT_GT(zeros_seen, 180);
  EXPECT_LT(zeros_seen, 320);
  dropout.eval();
  EXPECT_TRUE(dropout(x).is_same(x));
  EXPECT_HAS(error_of([] { nn::Dropout(1.5); }), "[Dropout] p must be in [0, 1]");
}

TEST(Activations, MatchTheirFormulas) {
  Tensor x = make({-2.0, -0.5, 0.0, 0.5, 2.0});
  std::vector<double> v = x.to_vector<double>(), relu_v, gelu_v, silu_v, tanh_v;
  for (double value : v) {
    relu_v.push_back(std::max(value, 0.0));
    gelu_v.push_back(0.5 * value * (1 + std::erf(value / std::sqrt(2.0))));
    silu_v.push_back(value / (1 + std::exp(-value)));
    tanh_v.push_back(std::tanh(value));
  }
  EXPECT_TRUE(all_close(nn::ReLU()(x), relu_v));
  EXPECT_TRUE(all_close(nn::GELU()(x), gelu_v));
  EXPECT_TRUE(all_close(nn::SiLU()(x), silu_v));
  EXPECT_TRUE(all_close(nn::Tanh()(x), tanh_v));
  EXPECT_HAS(error_of([] { nn::GELU("fast"); }), "approximate");
}

TEST(Pooling, ShapesValuesAndAdaptiveWindows) {
  Tensor x = arange(0, 16, 1, DType::f64).reshape({1, 1, 4, 4});
  EXPECT_TRUE(all_close(nn::MaxPool2d(2)(x), make({5, 7, 13, 15}, {1, 1, 2, 2})));
  EXPECT_TRUE(all_close(nn::AvgPool2d(2)(x), make({2.5, 4.5, 10.5, 12.5}, {1, 1, 2, 2})));
  EXPECT_TRUE(all_close(nn::AdaptiveAvgPool2d(1)(x), make({7.5}, {1, 1, 1, 1})));
  // 4 rows into 3 windows: [0, 2), [1, 3), [2, 4) as PyTorch assigns them.
  Tensor y = nn::AdaptiveAvgPool2d(std::vector<int64_t>{3, 1})(x);
  EXPECT_TRUE(all_close(y, make({3.5, 7.5, 11.5}, {1, 1, 3, 1})));
  EXPECT_EQ(nn::Flatten()(randn({2, 3, 4, 5})).shape(), (Shape{2, 60}));
  EXPECT_HAS(error_of([] { nn::MaxPool2d(0); }), "[MaxPool2d]");
  EXPECT_HAS(error_of([] { nn::adaptive_avg_pool2d(randn({4, 4}), {2, 2}); }),
             "[adaptive_avg_pool2d]");
}

TEST(Losses, AgainstDirectFormulas) {
  Tensor logits = make({1.0, 2.0, 0.5, -1.0, 0.0, 3.0}, {2, 3});
  Tensor target = Tensor::from_vector<int64_t>({1, 2}, {2});
  auto log_softmax_at = [](std::vector<double> row, int64_t k) {
    double total = 0;
    for (double v : row) total += std::exp(v);
    return row[k] - std::log(total);
  };
  const double ce = -(log_softmax_at({1, 2, 0.5}, 1) + log_softmax_at({-1, 0, 3}, 2)) / 2;
  EXPECT_TRUE(all_close(nn::CrossEntropyLoss()(logits, target), {ce}, 1e-10, 1e-12));
  EXPECT_TRUE(all_close(nn::NLLLoss()(log_softmax(logits, 1), target), {ce}, 1e-10, 1e-12));
  EXPECT_TRUE(all_close(nn::CrossEntropyLoss({}, -100, "sum")(logits, target), {2 * ce}, 1e-10,
                        1e-12));

  Tensor a = make({1, 2, 3}), b = make({1.5, 2, 1});
  EXPECT_TRUE(all_close(nn::MSELoss()(a, b), {(0.25 + 0 + 4) / 3}));
  EXPECT_TRUE(all_close(nn::MSELoss("none")(a, b), {0.25, 0, 4}));

  Tensor x = make({-30.0, -1.0, 0.0, 2.0, 40.0});
  Tensor y = make({0.0, 1.0, 1.0, 0.0, 1.0});
  std::vector<double> expected;
  for (int i = 0; i < 5; ++i) {
    const double xv = x.to_vector<double>()[i], yv = y.to_vector<double>()[i];
    // Stable form: max(x, 0) - x y + log(1 + exp(-|x|)).
    expected.push_back(std::max(xv, 0.0) - xv * yv + std::log1p(std::exp(-std::abs(xv))));
  }
  EXPECT_TRUE(all_close(nn::BCEWithLogitsLoss({}, "none")(x, y), expected, 1e-10, 1e-12));
  Tensor pos_weight = make({3.0});
  std::vector<double> weighted;
  for (int i = 0; i < 5; ++i) {
    const double xv = x.to_vector<double>()[i], yv = y.to_vector<double>()[i];
    weighted.push_back((1 - yv) * xv + (1 + 2 * yv) * std::log1p(std::exp(-std::abs(xv))) +
                       (1 + 2 * yv) * std::max(-xv, 0.0));
  }
  EXPECT_TRUE(all_close(nn::BCEWithLogitsLoss(pos_weight, "none")(x, y), weighted, 1e-10, 1e-12));
  EXPECT_TRUE(gradcheck(
      [&](const std::vector<Tensor>& v) { return nn::BCEWithLogitsLoss(pos_weight)(v[0], y); },
      {x.detach().set_requires_grad()}));
  EXPECT_HAS(error_of([] { nn::MSELoss("average"); }), "reduction");
  EXPECT_HAS(error_of([&] { nn::BCEWithLogitsLoss()(x, make({1, 0})); }),
             "[binary_cross_entropy_with_logits]");
}

}  // namespace
}  // namespace tessera::testing
