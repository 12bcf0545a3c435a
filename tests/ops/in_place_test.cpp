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

TEST(InPlace, OverwritingASavedTensorFailsAtBackward) {
  Tensor w = make({1.0, 2.0}).set_requires_grad();
  Tensor h = mul(w, 1.0);
  Tensor loss = sum(mul(h, h));
  h += 1.0;
  EXPECT_HAS(error_of([&] { loss.backward(); }), "is at version");
}

}  // namespace
}  // namespace tessera::testing
