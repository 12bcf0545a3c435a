#include <cmath>

#include "testing.h"

namespace tessera::testing {
namespace {

TEST(Autograd, AccumulatesAcrossUsesAndCalls) {
  Tensor x = make({1, 2, 3}).set_requires_grad();
  Tensor y = add(mul(x, x), x);  // diamond: x used twice
  sum(y).backward();
  EXPECT_TRUE(all_close(x.grad(), {3, 5, 7}));
  sum(mul(x, 2.0)).backward();  // a second backward accumulates
  EXPECT_TRUE(all_close(x.grad(), {5, 7, 9}));
  EXPECT_TRUE(x.is_leaf());
  EXPECT_FALSE(y.is_leaf());
  EXPECT_TRUE(y.requires_grad());
}

TEST(Autograd, NoGradAndDetach) {
  Tensor x = make({1, 2}).set_requires_grad();
  {
    NoGradGuard no_grad;
    Tensor y = mul(x, 2.0);
    EXPECT_FALSE(y.requires_grad());
    EXPECT_FALSE(grad_enabled());
  }
  EXPECT_TRUE(grad_enabled());
  Tensor d = x.detach();
  EXPECT_FALSE(d.requires_grad());
  EXPECT_TRUE(d.shares_storage(x));
  Tensor z = add(mul(x.detach(), x), 0.0);
  sum(z).backward();
  EXPECT_TRUE(all_close(x.grad(), {1, 2}));  // the detached factor is a constant
}

TEST(Autograd, RetainGraphAndFreedGraphError) {
  Tensor x = make({2.0}).set_requires_grad();
  Tensor y = mul(exp(x), x);
  y.backward(Tensor(), /*retain_graph=*/true);
  y.backward();
  double once = std::exp(2.0) * 3;
  EXPECT_TRUE(all_close(x.grad(), {2 * once}));
  try {
    y.backward();
    FAIL() << "expected an error";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("retain_graph"), std::string::npos) << error.what();
  }
}

TEST(Autograd, NonScalarNeedsGradientArgument) {
  Tensor x = make({1, 2}).set_requires_grad();
  Tensor y = mul(x, 3.0);
  EXPECT_THROW(y.backward(), Error);
  y.backward(make({1.0, 10.0}));
  EXPECT_TRUE(all_close(x.grad(), {3, 30}));
  EXPECT_THROW(mul(make({1.0}), 2.0).backward(), Error);  // nothing requires grad
  EXPECT_THROW(mul(x, 2.0).backward(make({1.0, 2.0, 3.0})), Error);
}

TEST(Autograd, CreateGraphGivesSecondDerivatives) {
  Tensor x = make({0.5, -1.0}).set_requires_grad();
  Tensor y = sum(mul(mul(x, x), x));  // sum x^3
  auto first = grad({y}, {x}, {}, false, /*create_graph=*/true);
  EXPECT_TRUE(all_close(first[0], {0.75, 3.0}));  // 3x^2
  EXPECT_TRUE(first[0].requires_grad());
  auto second = grad({sum(first[0])}, {x});
  EXPECT_TRUE(all_close(second[0], {3.0, -6.0}));  // 6x
  EXPECT_FALSE(x.grad().defined());                // grad() leaves .grad alone
}

TEST(Autograd, GradOfIntermediatesAndUnusedInputs) {
  Tensor x = make({1, 2}).set_requires_grad();
  Tensor w = make({3, 4}).set_requires_grad();
  Tensor h = mul(x, 2.0);
  Tensor y = sum(mul(h, h));
  auto grads = grad({y}, {h}, {}, true);
  EXPECT_TRUE(all_close(grads[0], {4, 8}));
  EXPECT_THROW(grad({y}, {w}, {}, true), Error);
  auto unused = grad({y}, {w}, {}, true, false, /*allow_unused=*/true);
  EXPECT_FALSE(unused[0].defined());
}

TEST(Autograd, GradientsThroughViewsReachTheBase) {
  Tensor x = make({1, 2, 3, 4, 5, 6}, {2, 3}).set_requires_grad();
  Tensor y = add(mul(x.select(0, 1), 10.0), sum(x.t().select(0, 0)));
  sum(y).backward();
  EXPECT_TRUE(all_close(x.grad(), {3, 0, 0, 13, 10, 10}));
}

TEST(Autograd, IntegerOutputsNeverRequireGrad) {
  Tensor x = make({1, 2}).set_requires_grad();
  EXPECT_FALSE(argmax(x).requires_grad());
  EXPECT_FALSE(x.to(DType::i64).requires_grad());
}

TEST(Autograd, LongChainsDoNotRecurse) {
  // The engine is iterative: a 20000-op chain backpropagates without
  // exhausting the stack.
  Tensor x = make({1.0}).set_requires_grad();
  Tensor y = x;
  for (int i = 0; i < 20000; ++i) y = add(y, 1e-4);
  y.backward();
  EXPECT_TRUE(all_close(x.grad(), {1.0}));
}

}  // namespace
}  // namespace tessera::testing
