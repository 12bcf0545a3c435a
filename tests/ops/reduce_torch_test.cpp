// The reductions against PyTorch in the same run: max / min along a dim
// with indices, amax / amin, prod (zeros included), all / any,
// count_nonzero, var_mean / std_mean; hand values beside them.

#include <cmath>

#include "testing.h"
#include "torch_check.h"

namespace tessera::testing {
namespace {

using V = std::vector<Tensor>;

TEST(ReduceMore, HandValues) {
  Tensor x = make({1, 5, 5, 2, 0, -3}, {2, 3});
  auto [values, indices] = max(x, 1);
  EXPECT_TRUE(all_close(values, {5, 2}));
  EXPECT_EQ(indices.to_vector<int64_t>(), (std::vector<int64_t>{1, 0}));  // first of the ties
  EXPECT_TRUE(all_close(prod(x, 1), {25, 0}));
  EXPECT_TRUE(all_close(prod(make({2, 3, 4}, {3})), {24}));
  EXPECT_EQ(any(x, 1).to_vector<bool>(), (std::vector<bool>{true, true}));
  EXPECT_EQ(all(x, 1).to_vector<bool>(), (std::vector<bool>{true, false}));
  EXPECT_EQ(count_nonzero(x).item<int64_t>(), 5);
  // The gradient of prod with one zero goes to the zero's position only.
  Tensor leaf = make({2, 0, 3}, {3});
  leaf.set_requires_grad();
  prod(leaf).backward();
  EXPECT_TRUE(all_close(leaf.grad(), {0, 6, 0}));
}

TEST(ReduceMoreTorch, MaxMinWithIndices) {
  EXPECT_TRUE(sweep_torch("torch.max(a, 1)", {{{3, 4}}, {{2, 3, 5}}, {{3, 0}}},
                          [](const V& x) {
                            auto [values, indices] = max(x[0], 1);
                            return V{values, indices};
                          }));
  EXPECT_TRUE(sweep_torch("torch.min(a, -1, keepdim=True)", {{{3, 4}}, {{}}, {{5}}},
                          [](const V& x) {
                            auto [values, indices] = min(x[0], -1, true);
                            return V{values, indices};
                          }));
  EXPECT_TRUE(sweep_torch("torch.max(a, 0)", {{{0, 3}}},
                          [](const V& x) {
                            auto [values, indices] = max(x[0], 0);
                            return V{values, indices};
                          }));  // both raise: no extremum of nothing
  // Ties: the gradient goes to the first maximum only (amax shares it).
  EXPECT_TRUE(matches_torch("torch.max(a, 0)", {make({1, 3, 3, 2}, {4})},
                            [](const V& x) {
                              auto [values, indices] = max(x[0], 0);
                              return V{values, indices};
                            }));
  EXPECT_TRUE(matches_torch("torch.amax(a, (0, 1))", {make({1, 3, 3, 2}, {2, 2})},
                            [](const V& x) { return amax(x[0], {0, 1}); }));
}

TEST(ReduceMoreTorch, Prod) {
  EXPECT_TRUE(sweep_torch("torch.prod(a)", {{{3, 4}}, {{}}, {{0}}},
                          [](const V& x) { return prod(x[0]); }));
  EXPECT_TRUE(sweep_torch("torch.prod(a, 1, keepdim=True)", {{{3, 4}}, {{2, 0}}, {{2, 3, 2}}},
                          [](const V& x) { return prod(x[0], 1, true); }));
  for (const Tensor& zeros_in : {make({0, 2, 3, 4}, {4}), make({0, 2, 0, 4}, {4}),
                                 make({1, 2, 3, 0, 2, 0}, {2, 3})}) {
    EXPECT_TRUE(matches_torch("torch.prod(a, -1)", {zeros_in},
                              [](const V& x) { return prod(x[0], -1); }));
    EXPECT_TRUE(matches_torch("torch.prod(a)", {zeros_in}, [](const V& x) { return prod(x[0]); }));
  }
  TorchOptions ints;
  ints.dtype = DType::i32;
  ints.low = -3;
  ints.high = 4;
  EXPECT_TRUE(sweep_torch("torch.prod(a, 0)", {{{5, 2}}},
                          [](const V& x) { return prod(x[0], 0); }, ints));
  EXPECT_TRUE(sweep_torch("torch.prod(a, dtype=torch.float64)", {{{5}}},
                          [](const V& x) { return prod(x[0], DType::f64); }, ints));
}

TEST(ReduceMoreTorch, AllAnyCountNonzero) {
  Tensor x = make({0, 1.5, 0, -2, std::nan(""), 3, 0, 0}, {2, 4});
  EXPECT_TRUE(matches_torch("torch.all(a)", {x}, [](const V& v) { return all(v[0]); }));
  EXPECT_TRUE(matches_torch("torch.any(a, 1)", {x}, [](const V& v) { return any(v[0], 1); }));
  EXPECT_TRUE(matches_torch("torch.all(a, 0, keepdim=True)", {x},
                            [](const V& v) { return all(v[0], 0, true); }));
  EXPECT_TRUE(matches_torch("torch.any(a)", {zeros({0, 3}, DType::f64)},
                            [](const V& v) { return any(v[0]); }));
  EXPECT_TRUE(matches_torch("torch.all(a)", {zeros({0}, DType::f64)},
                            [](const V& v) { return all(v[0]); }));
  EXPECT_TRUE(matches_torch("torch.all(a.to(torch.uint8), 1)", {x},
                            [](const V& v) { return all(v[0].to(DType::u8), 1); }));
  EXPECT_TRUE(matches_torch("torch.count_nonzero(a, (0, 1))", {x},
                            [](const V& v) { return count_nonzero(v[0], {0, 1}); }));
  EXPECT_TRUE(matches_torch("torch.count_nonzero(a, 1)", {x},
                            [](const V& v) { return count_nonzero(v[0], {1}); }));
}

TEST(ReduceMoreTorch, VarMeanStdMean) {
  EXPECT_TRUE(sweep_torch("torch.var_mean(a, 1)", {{{3, 4}}, {{2, 3, 5}}},
                          [](const V& x) {
                            auto [v, m] = var_mean(x[0], {1});
                            return V{v, m};
                          }));
  EXPECT_TRUE(sweep_torch("torch.std_mean(a, (0, -1), unbiased=False, keepdim=True)",
                          {{{3, 4}}, {{2, 3, 5}}},
                          [](const V& x) {
                            auto [s, m] = std_mean(x[0], {0, -1}, 0, true);
                            return V{s, m};
                          }));
}

}  // namespace
}  // namespace tessera::testing
