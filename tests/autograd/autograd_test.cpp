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

TEST(Autograd, DroppingAHugeGraphDoesNotRecurse) {
  // `running = running + loss` over an epoch: releasing the graph must not
  // overflow the stack through nested destructors.
  Tensor x = make({1.0}).set_requires_grad();
  Tensor running = make({0.0});
  for (int i = 0; i < 200'000; ++i) running = add(running, x);
  EXPECT_EQ(running.item<double>(), 2e5);
  running = Tensor();  // drops the graph
  // The same through saved inputs (mul saves both operands) and views.
  Tensor product = make({1.0});
  for (int i = 0; i < 100'000; ++i) product = mul(product.reshape({1, 1}).reshape({1}), x);
  product = Tensor();
  SUCCEED();
}

TEST(Autograd, OverwritingASavedOutputMakesBackwardFail) {
  Tensor x = make({1.0}).set_requires_grad();
  Tensor y = exp(x);  // exp's gradient reads its output
  Tensor loss = sum(y);
  y.fill_(0.0);
  std::string message = error_of([&] { loss.backward(); });
  EXPECT_HAS(message,
             "[backward] one of the tensors needed for the gradient was modified by an "
             "in-place operation: output 0 of 'exp' (f64 []) is at version 1 but "
             "was saved at version 0");
  EXPECT_FALSE(x.grad().defined());
}

TEST(Autograd, OverwritingASavedInputMakesBackwardFail) {
  Tensor x = make({2.0}).set_requires_grad();
  Tensor a = mul(x, 2.0);
  Tensor b = mul(a, a);
  a.copy_(make({10.0}));
  EXPECT_HAS(error_of([&] { b.backward(); }), "input 1 of 'mul' (f64 []) is at version 1");
  // Through a detached alias, which shares the version counter.
  Tensor w = make({3.0}).set_requires_grad();
  Tensor square = mul(w, w);
  w.detach().fill_(5.0);
  EXPECT_HAS(error_of([&] { square.backward(); }), "modified by an in-place operation");
  // Through the base of a saved view.
  Tensor base = make({1.0, 2.0, 3.0});
  Tensor v = base.narrow(0, 1, 2);
  Tensor z = make({1.0, 1.0}).set_requires_grad();
  Tensor product = sum(mul(v, z));
  base.zero_();
  EXPECT_HAS(error_of([&] { product.backward(); }), "'mul'");
}

TEST(Autograd, AnUnsavedTensorMayBeOverwrittenAfterUse) {
  // add's gradient reads nothing, so overwriting its input changes nothing.
  Tensor x = make({2.0}).set_requires_grad();
  Tensor a = mul(x, 3.0);
  Tensor b = add(a, 1.0);
  a.fill_(100.0);
  b.backward();
  EXPECT_TRUE(all_close(x.grad(), {3.0}));
}

TEST(Autograd, InPlaceIntoALeafOrItsViewIsRefusedWithGradOn) {
  Tensor w = make({1, 2, 3, 4}).set_requires_grad();
  EXPECT_HAS(error_of([&] { w.copy_(make({7.0})); }), "[copy_] a leaf tensor that requires grad");
  EXPECT_HAS(error_of([&] { w.narrow(0, 0, 2).copy_(make({7.0})); }),
             "[copy_] this [2] tensor is a view of a leaf that requires grad ([4])");
  EXPECT_HAS(error_of([&] { w.reshape({2, 2}).select(0, 1).fill_(0.0); }), "view of a leaf");
  EXPECT_TRUE(all_close(w, {1, 2, 3, 4}));
  {
    NoGradGuard no_grad;  // as optimizers and initialisers write
    w.narrow(0, 0, 2).copy_(make({7.0}));
  }
  EXPECT_TRUE(all_close(w, {7, 7, 3, 4}));
}

TEST(Autograd, CopyIntoAGraphTensorIsRecordedAsPyTorchDoes) {
  // The old value gets no gradient; the source gets the destination's.
  Tensor x = make({2.0, 3.0}).set_requires_grad();
  Tensor a = mul(x, 2.0);
  a.fill_(4.0);
  EXPECT_FALSE(a.is_leaf());
  Tensor b = mul(a, a);
  sum(b).backward();
  EXPECT_TRUE(all_close(x.grad(), {0.0, 0.0}));

  Tensor source = make({1.0, 2.0}).set_requires_grad();
  Tensor buffer = zeros({3, 2}, DType::f64);
  buffer.copy_(source);  // broadcast along dim 0
  EXPECT_TRUE(buffer.requires_grad());
  sum(mul(buffer, make({1.0, 10.0}))).backward();
  EXPECT_TRUE(all_close(source.grad(), {3.0, 30.0}));
  // Writing into a view of a tracked tensor is recorded on the base, as
  // PyTorch's CopySlices: the overwritten element gets no gradient.
  x.set_grad(Tensor());
  source.set_grad(Tensor());
  Tensor c = mul(x, 1.0);
  c.narrow(0, 0, 1).copy_(source.narrow(0, 0, 1));
  sum(mul(c, make({2.0, 5.0}))).backward();
  EXPECT_TRUE(all_close(x.grad(), {0.0, 5.0}));
  EXPECT_TRUE(all_close(source.grad(), {2.0, 0.0}));
}

TEST(Autograd, OptimizerStepsBumpTheVersion) {
  Tensor w = make({1.0, 2.0}).set_requires_grad();
  Tensor loss = sum(mul(w, w));
  optim::SGD sgd({w}, {.lr = 0.1});
  sum(mul(w, 3.0)).backward();
  const uint64_t before = w.version();
  sgd.step();
  EXPECT_GT(w.version(), before);
  EXPECT_HAS(error_of([&] { loss.backward(); }), "of 'mul' (f64 [2]) is at version 1");
}

TEST(Autograd, OverlappingCopyIsRefusedLikePyTorch) {
  Tensor x = make({0, 1, 2, 3, 4, 5});
  EXPECT_HAS(error_of([&] { x.narrow(0, 1, 3).copy_(x.narrow(0, 0, 3)); }),
             "[copy_] writes input 0 in place, but input 1 partly overlaps its memory");
  x.narrow(0, 3, 3).copy_(x.narrow(0, 0, 3));  // disjoint
  EXPECT_TRUE(all_close(x, {0, 1, 2, 0, 1, 2}));
  x.copy_(x);  // the same memory: nothing to do
  EXPECT_TRUE(all_close(x, {0, 1, 2, 0, 1, 2}));
}

}  // namespace
}  // namespace tessera::testing
