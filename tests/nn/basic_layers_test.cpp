#include <cmath>

#include "testing.h"

namespace tessera::testing {
namespace {

TEST(Identity, ReturnsItsInput) {
  Tensor x = uniform({2, 3});
  nn::Identity identity;
  EXPECT_TRUE(all_close(identity(x), x, 0.0, 0.0));
  EXPECT_EQ(identity.parameters().size(), 0u);
  EXPECT_EQ(identity.repr(), "Identity()");
}

TEST(ActivationModules, SigmoidSoftmaxAndLogSoftmax) {
  Tensor x = make({0.0, 1.0, -2.0, 3.0}, {2, 2});
  EXPECT_TRUE(all_close(nn::Sigmoid()(make({0.0, 2.0})), {0.5, 1.0 / (1.0 + std::exp(-2.0))}));
  // Softmax over dim 1 of rows (0, 1) and (-2, 3).
  const double a = 1.0 / (1.0 + std::exp(1.0)), b = 1.0 / (1.0 + std::exp(5.0));
  EXPECT_TRUE(all_close(nn::Softmax(1)(x), {a, 1 - a, b, 1 - b}));
  EXPECT_TRUE(all_close(nn::Softmax(-1)(x), nn::Softmax(1)(x), 0.0, 0.0));
  EXPECT_TRUE(all_close(nn::LogSoftmax(1)(x),
                        {std::log(a), std::log(1 - a), std::log(b), std::log(1 - b)}));
  EXPECT_EQ(nn::Softmax(0).repr(), "Softmax(dim=0)");
  EXPECT_EQ(nn::LogSoftmax(1).repr(), "LogSoftmax(dim=1)");
  EXPECT_HAS(error_of([&] { nn::Softmax(2)(x); }), "dim");
}

TEST(Unflatten, SplitsOneDimAndUndoesFlatten) {
  Tensor x = uniform({2, 12, 5});
  nn::Unflatten unflatten(1, {3, -1});
  EXPECT_EQ(unflatten(x).shape(), (Shape{2, 3, 4, 5}));
  EXPECT_EQ(nn::Unflatten(-1, {5, 1})(x).shape(), (Shape{2, 12, 5, 1}));
  EXPECT_TRUE(all_close(nn::Flatten(1, 2)(unflatten(x)), x, 0.0, 0.0));
  EXPECT_EQ(unflatten.repr(), "Unflatten(dim=1, unflattened_size=(3, -1))");
  EXPECT_HAS(error_of([&] { nn::Unflatten(1, {5, 5})(x); }), "[Unflatten] cannot split dim 1");
  EXPECT_HAS(error_of([&] { nn::Unflatten(3, {1})(x); }), "[Unflatten] dim 3");
  EXPECT_HAS(error_of([&] { nn::Unflatten(1, {-1, -1}); }), "at most one -1");
  EXPECT_HAS(error_of([&] { nn::Unflatten(1, {}); }), "must not be empty");
}

TEST(Conv2dOptions, SetsArgumentsByName) {
  nn::Conv2d conv(nn::Conv2dOptions(3, 8, 3).stride(2).padding(1).bias(false));
  EXPECT_FALSE(conv.bias.defined());
  EXPECT_EQ(conv.weight.shape(), (Shape{8, 3, 3, 3}));
  EXPECT_EQ(conv.parameters().size(), 1u);
  EXPECT_EQ(conv.extra_repr(), "3, 8, kernel_size=(3, 3), stride=(2, 2), padding=(1, 1), bias=false");
  Tensor x = uniform({1, 3, 8, 8}, -1, 1, 1, DType::f32);
  EXPECT_EQ(conv(x).shape(), (Shape{1, 8, 4, 4}));
  nn::Conv2d grouped(nn::Conv2dOptions(4, 4, {1, 3}).groups(2).dilation({1, 2}));
  EXPECT_EQ(grouped.weight.shape(), (Shape{4, 2, 1, 3}));
  EXPECT_TRUE(grouped.bias.defined());
  EXPECT_HAS(error_of([&] { nn::Conv2d(nn::Conv2dOptions(3, 8, 3).output_padding(1)); }),
             "output_padding");
}

TEST(Conv1d, MatchesTheFunctionalOp) {
  manual_seed(0);
  nn::Conv1d conv(nn::Conv1dOptions(4, 6, 3).stride(2).padding(1).groups(2));
  EXPECT_EQ(conv.weight.shape(), (Shape{6, 2, 3}));
  EXPECT_EQ(conv.bias.shape(), (Shape{6}));
  Tensor x = uniform({2, 4, 9}, -1, 1, 3, DType::f32);
  Tensor expected = conv1d(x, conv.weight, conv.bias, 2, 1, 1, 2);
  EXPECT_TRUE(all_close(conv(x), expected, 0.0, 0.0));
  EXPECT_EQ(conv(x.select(0, 0)).shape(), (Shape{6, 5}));  // unbatched
  // PyTorch's default init: U(-1/sqrt(fan_in), 1/sqrt(fan_in)), fan_in = 2 * 3.
  const double bound = 1.0 / std::sqrt(6.0);
  for (double w : conv.weight.to_vector<double>()) EXPECT_LE(std::abs(w), bound);
  EXPECT_EQ(conv.extra_repr(), "4, 6, kernel_size=(3,), stride=(2,), padding=(1,), groups=2");
  nn::Conv1d plain(2, 3, 5, 1, 0, 1, 1, false);
  EXPECT_FALSE(plain.bias.defined());
  EXPECT_HAS(error_of([&] { nn::Conv1d(3, 4, 3, 1, 0, 1, 2); }), "[Conv1d] in_channels (3)");
  EXPECT_HAS(error_of([&] { nn::Conv1d(nn::Conv1dOptions(2, 2, {3, 3})); }), "kernel_size");
}

TEST(ConvTranspose2d, MatchesTheFunctionalOpAndPyTorchsLayout) {
  manual_seed(0);
  nn::ConvTranspose2d deconv(4, 6, 3, 2, 1, 1, 2);
  EXPECT_EQ(deconv.weight.shape(), (Shape{4, 3, 3, 3}));  // [in, out / groups, kh, kw]
  Tensor x = uniform({2, 4, 5, 5}, -1, 1, 3, DType::f32);
  Tensor y = deconv(x);
  // (5 - 1) * 2 - 2 * 1 + (3 - 1) + 1 + 1 = 10
  EXPECT_EQ(y.shape(), (Shape{2, 6, 10, 10}));
  EXPECT_TRUE(all_close(y, conv_transpose2d(x, deconv.weight, deconv.bias, 2, 1, 1, 2), 0.0, 0.0));
  const double bound = 1.0 / std::sqrt(3.0 * 9.0);
  for (double w : deconv.weight.to_vector<double>()) EXPECT_LE(std::abs(w), bound);
  EXPECT_EQ(deconv.extra_repr(),
            "4, 6, kernel_size=(3, 3), stride=(2, 2), padding=(1, 1), output_padding=(1, 1), "
            "groups=2");
  nn::ConvTranspose2d named(nn::ConvTranspose2dOptions(3, 2, {2, 4}).stride(2).bias(false));
  EXPECT_FALSE(named.bias.defined());
  EXPECT_EQ(named(uniform({3, 4, 4}, -1, 1, 1, DType::f32)).shape(), (Shape{2, 8, 10}));
  EXPECT_HAS(error_of([&] { nn::ConvTranspose2d(4, 6, 3, 1, 0, 0, 4); }),
             "[ConvTranspose2d] in_channels (4) and out_channels (6)");
}

TEST(LossOptions, CrossEntropyAndNllByName) {
  Tensor logits = make({1.0, 2.0, 0.5, -1.0, 0.0, 3.0}, {2, 3});
  Tensor target = Tensor::from_vector(std::vector<int64_t>{2, 0}, {2});
  nn::CrossEntropyLoss smoothed({.reduction = "sum", .label_smoothing = 0.2});
  EXPECT_TRUE(all_close(smoothed(logits, target),
                        cross_entropy(logits, target, {}, -100, "sum", 0.2), 0.0, 0.0));
  nn::CrossEntropyLoss ignoring({.ignore_index = 0});
  EXPECT_TRUE(all_close(ignoring(logits, target), cross_entropy(logits, target, {}, 0), 0.0, 0.0));
  nn::NLLLoss nll({.reduction = "none"});
  EXPECT_EQ(nll(log_softmax(logits, 1), target).shape(), (Shape{2}));
  EXPECT_EQ(nn::CrossEntropyLoss().extra_repr(), "reduction='mean'");
}

}  // namespace
}  // namespace tessera::testing
