#include <cmath>
#include <sstream>

#include "tessera/ops/comparison.h"
#include "tessera/ops/print.h"
#include "testing.h"

namespace tessera::testing {
namespace {

std::string printed(const Tensor& x) {
  std::ostringstream out;
  out << x;
  return out.str();
}

TEST(Print, LikePyTorch) {
  EXPECT_EQ(printed(make({1, 2, 3, 4}, {2, 2}).to(DType::f32)),
            "tensor([[1., 2.],\n        [3., 4.]])");
  EXPECT_EQ(printed(make({0.5, -1.25}, {2})), "tensor([ 0.5000, -1.2500], dtype=f64)");
  EXPECT_EQ(printed(Tensor::scalar(3.0)), "tensor(3.)");
  EXPECT_EQ(printed(Tensor::from_vector<int64_t>({1, 20, 300}, {3})), "tensor([  1,  20, 300])");
  EXPECT_EQ(printed(zeros({2}, DType::boolean)), "tensor([False, False])");
  EXPECT_EQ(printed(zeros({0, 3})), "tensor([], size=(0, 3))");
  EXPECT_EQ(printed(make({1e-5, 1.0}, {2}).to(DType::f32)), "tensor([1.0000e-05, 1.0000e+00])");
  EXPECT_EQ(printed(make({1, 2}, {2}).set_requires_grad()),
            "tensor([1., 2.], dtype=f64, requires_grad=True)");
  EXPECT_EQ(printed(arange(0, 8).reshape({2, 2, 2})),
            "tensor([[[0, 1],\n         [2, 3]],\n\n        [[4, 5],\n         [6, 7]]])");
  // Beyond 1000 elements: three edge items per dimension.
  EXPECT_EQ(printed(arange(0, 2000)), "tensor([   0,    1,    2,  ..., 1997, 1998, 1999])");
  const std::string big = printed(arange(0, 1200).reshape({40, 30}));
  EXPECT_EQ(big.substr(0, 40), "tensor([[   0,    1,    2,  ...,   27,  ");
  EXPECT_NE(big.find("        ...,\n        [1110,"), std::string::npos) << big;
  PrintOptions options = print_options();
  PrintOptions two = options;
  two.precision = 2;
  set_print_options(two);
  EXPECT_EQ(printed(make({0.125}, {1}).to(DType::f32)), "tensor([0.12])");
  set_print_options(options);
  EXPECT_THROW(set_print_options({.precision = -1}), Error);
}

TEST(Comparison, OperatorsAndCloseness) {
  Tensor x = make({1, 2, 3}, {3});
  EXPECT_EQ((x == 2).to_vector<int64_t>(), (std::vector<int64_t>{0, 1, 0}));
  EXPECT_EQ((x != 2.0).to_vector<int64_t>(), (std::vector<int64_t>{1, 0, 1}));
  EXPECT_EQ((x < make({2.0})).to_vector<int64_t>(), (std::vector<int64_t>{1, 0, 0}));
  EXPECT_EQ((2 <= x).to_vector<int64_t>(), (std::vector<int64_t>{0, 1, 1}));
  EXPECT_EQ((x > 1).dtype(), DType::boolean);
  EXPECT_EQ((1.5 >= x).to_vector<int64_t>(), (std::vector<int64_t>{1, 0, 0}));
  const double inf = INFINITY;
  const double nan = NAN;
  Tensor a = make({1.0, inf, -inf, nan, 1.0}, {5});
  Tensor b = make({1.0 + 1e-9, inf, inf, nan, 1.1}, {5});
  EXPECT_EQ(isclose(a, b).to_vector<int64_t>(), (std::vector<int64_t>{1, 1, 0, 0, 0}));
  EXPECT_EQ(isclose(a, b, 1e-5, 1e-8, true).to_vector<int64_t>(),
            (std::vector<int64_t>{1, 1, 0, 1, 0}));
  EXPECT_TRUE(allclose(make({1.0, 2.0}, {2}), make({1.0, 2.0 + 1e-6}, {2})));
  EXPECT_FALSE(allclose(make({1.0, 2.0}, {2}), make({1.0, 2.1}, {2})));
  EXPECT_TRUE(allclose(make({1.0, 2.0}, {2}), make({1.0, 2.1}, {2}), 0.0, 0.2));
  EXPECT_TRUE(equal(x, make({1, 2, 3}, {3}).to(DType::f32)));
  EXPECT_FALSE(equal(x, make({1, 2}, {2})));
  EXPECT_FALSE(equal(x, make({1, 2, 4}, {3})));
  EXPECT_THROW(isclose(x, x, -1.0), Error);
}

}  // namespace
}  // namespace tessera::testing
