#include "tessera/ops/in_place.h"
#include "testing.h"
#include "torch_check.h"

namespace tessera::testing {
namespace {

TEST(InPlace, OperatorsWriteIntoTheTensorAndItsViews) {
  Tensor x = make({1, 2, 3, 4}, {2, 2});
  Tensor same = x;
  x += make({10, 20}, {2});
  EXPECT_TRUE(all_close(same, {11, 22, 13, 24}));
  x -= 1.0;
  x *= make({2.0});
  x /= 4.0;
  EXPECT_TRUE(all_close(x, {5, 10.5, 6, 11.5}));
  x.t().select(0, 0) += 100.0;  // column 0, through a strided view
  EXPECT_TRUE(all_close(x, {105, 10.5, 106, 11.5}));
  Tensor counts = Tensor::from_vector<int64_t>({1, 2}, {2});
  counts *= 3;
  EXPECT_EQ(counts.to_vector<int64_t>(), (std::vector<int64_t>{3, 6}));
}

TEST(InPlace, ChecksAsPyTorchDoes) {
  Tensor counts = Tensor::from_vector<int64_t>({1, 2}, {2});
  EXPECT_HAS(error_of([&] { counts /= 2.0; }),
             "[div_] the result type f32 can't be cast to the destination's type i64");
  EXPECT_HAS(error_of([&] { counts += make({0.5}); }), "can't be cast to the destination's type i64");
  Tensor small = make({1, 2}, {2});
  EXPECT_HAS(error_of([&] { small += make({1, 2, 3, 4}, {2, 2}); }),
             "[add_] the result's shape [2, 2] does not match the destination's [2]");
  Tensor leaf = make({1, 2}).set_requires_grad();
  EXPECT_HAS(error_of([&] { leaf += 1.0; }), "a leaf tensor that requires grad");
}

TEST(InPlace, GradientsMatchPyTorch) {
  EXPECT_TRUE(matches_torch("(lambda z: (z.mul_(b), z.add_(a), z)[2])(a * 2)",
                            {uniform({2, 3}), uniform({3})}, [](const Inputs& x) {
                              Tensor z = mul(x[0], 2.0);
                              z *= x[1];
                              z += x[0];
                              return z;
                            }));
  EXPECT_TRUE(matches_torch("(lambda z: (z[:, 1:].div_(b), z)[1])(a.exp())",
                            {uniform({2, 3}), uniform({2, 2}, 1.0, 2.0)}, [](const Inputs& x) {
                              Tensor z = exp(x[0]);
                              z.slice(1, 1, 3) /= x[1];
                              return z;
                            }));
}

TEST(InPlace, MethodFormsAsLibtorch) {
  Tensor x = make({-2, -1, 1, 2}, {2, 2});
  x.add_(1.0).mul_(make({1.0, 2.0}));
  EXPECT_TRUE(all_close(x, {-1, 0, 2, 6}));
  x.sub_(make({1.0})).div_(2.0).neg_();
  EXPECT_TRUE(all_close(x, {1, 0.5, -0.5, -2.5}));
  x.clamp_(-1.0, 0.75).abs_();
  EXPECT_TRUE(all_close(x, {0.75, 0.5, 0.5, 1}));
  x.pow_(2).sqrt_();
  EXPECT_TRUE(all_close(x, {0.75, 0.5, 0.5, 1}));
  x.select(1, 0).zero_();
  EXPECT_TRUE(all_close(x, {0, 0.5, 0, 1}));
  x.sub_(0.5).relu_();
  EXPECT_TRUE(all_close(x, {0, 0, 0, 0.5}));
  Tensor flags = zeros({2}, DType::boolean);
  EXPECT_HAS(error_of([&] { flags.add_(1); }), "[add_] the result type i64 can't be cast");
  EXPECT_TRUE(matches_torch("(lambda z: (z.clamp_(-0.5, 0.5), z.tanh_(), z.exp_())[2])(a * 1)",
                            {uniform({3, 2})}, [](const Inputs& in) {
                              Tensor z = mul(in[0], 1.0);
                              z.clamp_(-0.5, 0.5).tanh_().exp_();
                              return z;
                            }));
  EXPECT_TRUE(matches_torch("(lambda z: (z.sigmoid_(), z.pow_(b))[1])(a * 1)",
                            {uniform({2, 3}), uniform({3}, 1.0, 2.0)}, [](const Inputs& in) {
                              Tensor z = mul(in[0], 1.0);
                              return z.sigmoid_().pow_(in[1]);
                            }));
}

TEST(TensorMethods, AreTheOps) {
  Tensor x = make({1, -2, 3, -4, 5, -6}, {2, 3});
  EXPECT_TRUE(all_close(x.sum(), {-3}));
  EXPECT_TRUE(all_close(x.sum({1}, true), {2, -5}));
  EXPECT_EQ(x.sum({1}, true).shape(), (Shape{2, 1}));
  EXPECT_TRUE(all_close(x.mean({0}), {-1.5, 1.5, -1.5}));
  EXPECT_TRUE(all_close(x.max(), {5}));
  EXPECT_TRUE(all_close(x.min(), {-6}));
  EXPECT_EQ(x.argmax(1).to_vector<int64_t>(), (std::vector<int64_t>{2, 1}));
  EXPECT_EQ(x.argmin().to_vector<int64_t>(), (std::vector<int64_t>{5}));
  EXPECT_TRUE(all_close(x.abs().sqrt().square(), {1, 2, 3, 4, 5, 6}));
  EXPECT_TRUE(all_close(x.neg().relu(), {0, 2, 0, 4, 0, 6}));
  EXPECT_TRUE(all_close(x.clamp(-1.0, std::nullopt), {1, -1, 3, -1, 5, -1}));
  EXPECT_TRUE(all_close(x.pow(2).sum(), {91}));
  EXPECT_TRUE(all_close(x.matmul(x.t()), {14, -32, -32, 77}));
  EXPECT_TRUE(matches_torch("a.exp().log().sin().cos().tanh().sigmoid() + a.rsqrt()",
                            {uniform({2, 3}, 0.5, 2.0)}, [](const Inputs& in) {
                              return add(in[0].exp().log().sin().cos().tanh().sigmoid(),
                                         in[0].rsqrt());
                            }));
  EXPECT_TRUE(matches_torch("a.softmax(1) + a.log_softmax(0)", {uniform({2, 3})},
                            [](const Inputs& in) {
                              return add(in[0].softmax(1), in[0].log_softmax(0));
                            }));
}

TEST(InPlace, OverwritingASavedTensorFailsAtBackward) {
  Tensor w = make({1.0, 2.0}).set_requires_grad();
  Tensor h = mul(w, 1.0);
  Tensor loss = sum(mul(h, h));
  h += 1.0;
  EXPECT_HAS(error_of([&] { loss.backward(); }), "is at version");
}

// copy_ and fill_ are ops: the output is the written input itself, its
// version moves, and strided, broadcast and casting writes take one pass.
TEST(InPlace, CopyAndFillAreOpsThatWriteTheirInput) {
  Tensor x = zeros({2, 3});
  const uint64_t before = x.version();
  std::vector<Tensor> out = call(find_op("fill_"), {x}, {{"value", 2.5}});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_TRUE(out[0].is_same(x));
  EXPECT_GT(x.version(), before);
  EXPECT_TRUE(all_close(x, {2.5, 2.5, 2.5, 2.5, 2.5, 2.5}));
  // A broadcast f64 row into a transposed (strided) destination.
  Tensor base = zeros({3, 2});
  base.t().copy_(Tensor::from_vector<double>({1, 2, 3}, {3}));
  EXPECT_TRUE(all_close(base, {1, 1, 2, 2, 3, 3}));
  // fill_ of integers is exact; of a column of a matrix, strided.
  Tensor big = zeros({2}, DType::i64);
  call(find_op("fill_"), {big}, {{"value", 0.0}, {"int_value", int64_t{9007199254740993}}});
  EXPECT_EQ(big.to_vector<int64_t>(), (std::vector<int64_t>{9007199254740993, 9007199254740993}));
  Tensor m = zeros({2, 3});
  m.select(1, 1).fill_(7.0);
  EXPECT_TRUE(all_close(m, {0, 7, 0, 0, 7, 0}));
  // Interleaved views of one storage do not meet: allowed, as in PyTorch.
  Tensor v = Tensor::from_vector<float>({0, 1, 2, 3, 4, 5}, {6});
  v.slice(0, 0, 6, 2).copy_(v.slice(0, 1, 6, 2));
  EXPECT_EQ(v.to_vector<float>(), (std::vector<float>{1, 1, 3, 3, 5, 5}));
  // Meta destinations check shapes and write nothing.
  Tensor meta = Tensor::empty({2, 3}, DType::f32, Device::meta());
  EXPECT_TRUE(meta.fill_(1.0).is_meta());
  meta.copy_(uniform({3}));
  EXPECT_HAS(error_of([&] { meta.copy_(uniform({4})); }), "[copy_] shapes cannot be broadcast");
}

TEST(InPlace, AnInPlaceOpMayNotWriteWhatAutogradTracks) {
  Tensor w = uniform({3}).set_requires_grad();
  EXPECT_HAS(error_of([&] {
               call(find_op("fill_"), {w}, {{"value", 1.0}});
             }),
             "[fill_] writes input 0 ([3]) in place, and it is a leaf that requires grad");
  Tensor h = mul(w, 2.0);
  EXPECT_HAS(error_of([&] {
               call(find_op("copy_"), {zeros({3}), h});
             }),
             "recorded by autograd only through its Tensor method");
  // Through the Tensor method the write is recorded: src gets the gradient.
  Tensor y = zeros({3});
  y.copy_(h);
  sum(y).backward();
  EXPECT_TRUE(all_close(w.grad(), {2, 2, 2}));
  // Under NoGradGuard, as optimizers run, writing a leaf is fine.
  NoGradGuard no_grad;
  call(find_op("fill_"), {w}, {{"value", 1.0}});
  EXPECT_TRUE(all_close(w, {1, 1, 1}));
}

using V = std::vector<Tensor>;
TESSERA_SBP_CASE("copy_", [] { return V{uniform({4, 6}, -1, 1, 1), uniform({6}, -1, 1, 2)}; });
TESSERA_SBP_CASE("copy_", [] {
  return V{uniform({5, 3}, -1, 1, 3), uniform({5, 3}, -1, 1, 4).to(DType::f64)};
});
TESSERA_SBP_CASE(
    "fill_",
    [] {
      return V{uniform({5, 3}, -1, 1, 5)};
    },
    Attrs{{"value", 2.5}});

}  // namespace
}  // namespace tessera::testing
