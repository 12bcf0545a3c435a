// The PyTorch comparison helper must catch what it exists to catch: wrong
// values, shapes, dtypes, gradients and error behaviour.

#include "torch_check.h"

#include "testing.h"

namespace tessera::testing {
namespace {

Tensor first(const Inputs& x) { return x[0]; }

TEST(TorchCheck, AgreesWithPyTorchOnAnExistingOp) {
  EXPECT_TRUE(sweep_torch("torch.tanh(a) * b", {{{3, 4}, {4}}, {{}, {}}, {{0, 2}, {2}}},
                          [](const Inputs& x) { return mul(tanh(x[0]), x[1]); }));
  EXPECT_TRUE(matches_torch("torch.max(a, dim=1)", {uniform({3, 5})}, [](const Inputs& x) {
    return std::vector<Tensor>{amax(x[0], {1}), argmax(x[0], 1)};
  }));
}

TEST(TorchCheck, CatchesWrongValues) {
  auto result = matches_torch("torch.sin(a)", {uniform({4})},
                              [](const Inputs& x) { return cos(x[0]); });
  ASSERT_FALSE(result);
  EXPECT_HAS(std::string(result.message()), "output 0 differs");
}

TEST(TorchCheck, CatchesWrongShapesAndDtypes) {
  auto shape = matches_torch("a.sum(0)", {uniform({2, 3})},
                             [](const Inputs& x) { return sum(x[0], {1}); });
  ASSERT_FALSE(shape);
  EXPECT_HAS(std::string(shape.message()), "PyTorch's is f64[3]");
  auto dtype = matches_torch("a.float()", {uniform({2})}, first);
  ASSERT_FALSE(dtype);
  EXPECT_HAS(std::string(dtype.message()), "f32");
}

TEST(TorchCheck, CatchesWrongGradients) {
  // Same values, wrong gradient: a detached branch.
  auto result = matches_torch("a * a", {uniform({3})}, [](const Inputs& x) {
    return mul(x[0], x[0].detach());
  });
  ASSERT_FALSE(result);
  EXPECT_HAS(std::string(result.message()), "gradient of input 0");
}

TEST(TorchCheck, ErrorsMustAgree) {
  auto torch_raises = matches_torch("a @ b", {uniform({2, 3}), uniform({2, 3})},
                                    [](const Inputs& x) { return add(x[0], x[1]); });
  ASSERT_FALSE(torch_raises);
  EXPECT_HAS(std::string(torch_raises.message()), "PyTorch raises");
  EXPECT_TRUE(matches_torch("a @ b", {uniform({2, 3}), uniform({2, 3})},
                            [](const Inputs& x) { return matmul(x[0], x[1]); }));
  auto tessera_raises = matches_torch("a + b", {uniform({2, 3}), uniform({3})},
                                      [](const Inputs& x) { return matmul(x[0], x[1].reshape({1, 3})); });
  ASSERT_FALSE(tessera_raises);
  EXPECT_HAS(std::string(tessera_raises.message()), "Tessera raises");
}

TEST(TorchCheck, ABrokenExpressionIsNotAnAgreement) {
  auto result = matches_torch("torch.no_such_op(a)", {uniform({2})}, [](const Inputs& x) {
    return matmul(x[0], x[0].reshape({1, 2}));  // raises too
  });
  ASSERT_FALSE(result);
  EXPECT_HAS(std::string(result.message()), "expression is broken");
}

TEST(TorchCheck, NonContiguousCopiesKeepValues) {
  Tensor x = uniform({3, 4});
  Tensor spread = non_contiguous_copy(x);
  EXPECT_FALSE(spread.is_contiguous());
  EXPECT_TRUE(all_close(spread, x, 0, 0));
}

}  // namespace
}  // namespace tessera::testing
