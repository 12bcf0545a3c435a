// cumsum, cumprod, sort, argsort and topk: hand values, PyTorch in the same
// run (values, indices, gradients; 0-d, empty, negative dims,
// non-contiguous), finite differences and the SBP checker.

#include <cmath>

#include "testing.h"
#include "torch_check.h"

namespace tessera::testing {
namespace {

using V = std::vector<Tensor>;

TEST(Scan, HandValues) {
  Tensor x = make({1, 2, 3, 4, 5, 6}, {2, 3});
  EXPECT_TRUE(all_close(cumsum(x, 1), make({1, 3, 6, 4, 9, 15}, {2, 3})));
  EXPECT_TRUE(all_close(cumsum(x, 0), make({1, 2, 3, 5, 7, 9}, {2, 3})));
  EXPECT_TRUE(all_close(cumprod(x, -1), make({1, 2, 6, 4, 20, 120}, {2, 3})));
  // Integers accumulate in i64 unless a dtype is given.
  Tensor ints = make({1, 2, 3}, {3}, DType::i32);
  EXPECT_EQ(cumsum(ints, 0).dtype(), DType::i64);
  EXPECT_EQ(cumsum(ints, 0, DType::f32).dtype(), DType::f32);
  EXPECT_EQ(cumsum(ints, 0).to_vector<int64_t>(), (std::vector<int64_t>{1, 3, 6}));
}

TEST(Scan, CumprodGradientWithZeros) {
  // d/dx_k of sum(cumprod(x)) by hand for x = [2, 0, 3]: outputs [2, 0, 0].
  // d/dx0 = 1 + x1 + x1 x2 = 1; d/dx1 = x0 + x0 x2 = 8; d/dx2 = x0 x1 = 0.
  Tensor x = make({2, 0, 3}, {3});
  x.set_requires_grad();
  sum(cumprod(x, 0)).backward();
  EXPECT_TRUE(all_close(x.grad(), make({1, 8, 0}, {3})));
  EXPECT_TRUE(gradcheck([](const V& in) { return cumprod(in[0], 1); },
                        {make({1, 0, 2, 0, 3, 4, 0.5, 2}, {2, 4}).set_requires_grad()}));
}

TEST(Sort, HandValuesNanAndTies) {
  const double nan = std::nan("");
  Tensor x = make({3, nan, 1, 3, 2}, {5});
  auto [values, indices] = sort(x);
  EXPECT_EQ(indices.to_vector<int64_t>(), (std::vector<int64_t>{2, 4, 0, 3, 1}));
  auto [down, down_indices] = sort(x, 0, true);
  EXPECT_EQ(down_indices.to_vector<int64_t>(), (std::vector<int64_t>{1, 0, 3, 4, 2}));
  EXPECT_TRUE(std::isnan(down.to_vector<double>()[0]));
  // Of the tied 5s, topk picks the one PyTorch's kernel picks (torch.topk
  // gives indices [3, 2] here), not the first.
  auto [top, top_indices] = topk(make({5, 1, 5, 7}, {4}), 2);
  EXPECT_EQ(top.to_vector<double>(), (std::vector<double>{7, 5}));
  EXPECT_EQ(top_indices.to_vector<int64_t>(), (std::vector<int64_t>{3, 2}));
  EXPECT_EQ(argsort(make({2, 1}, {2}, DType::i64)).to_vector<int64_t>(),
            (std::vector<int64_t>{1, 0}));
}

TEST(ScanTorch, CumsumCumprod) {
  EXPECT_TRUE(sweep_torch("torch.cumsum(a, dim=1)", {{{3, 4}}, {{2, 5, 3}}, {{0, 3}}},
                          [](const V& x) { return cumsum(x[0], 1); }));
  EXPECT_TRUE(sweep_torch("torch.cumsum(a, dim=-1)", {{{}}, {{7}}, {{2, 0}}},
                          [](const V& x) { return cumsum(x[0], -1); }));
  EXPECT_TRUE(sweep_torch("torch.cumprod(a, dim=0)", {{{5, 3}}, {{}}, {{0}}, {{4, 2, 3}}},
                          [](const V& x) { return cumprod(x[0], 0); }));
  EXPECT_TRUE(sweep_torch("torch.cumprod(a, dim=-2)", {{{4, 3}}, {{2, 3, 2}}},
                          [](const V& x) { return cumprod(x[0], -2); }));
  EXPECT_TRUE(matches_torch("torch.cumprod(a, 0)", {make({2, 0, 3, 0, 5}, {5})},
                            [](const V& x) { return cumprod(x[0], 0); }));
  TorchOptions ints;
  ints.dtype = DType::i32;
  ints.low = -5;
  ints.high = 5;
  EXPECT_TRUE(sweep_torch("torch.cumsum(a, 0)", {{{6}}, {{3, 2}}},
                          [](const V& x) { return cumsum(x[0], 0); }, ints));
  EXPECT_TRUE(sweep_torch("torch.cumsum(a, 0, dtype=torch.float64)", {{{6}}},
                          [](const V& x) { return cumsum(x[0], 0, DType::f64); }, ints));
  EXPECT_TRUE(sweep_torch("torch.cumsum(a, 2)", {{{3, 4}}},
                          [](const V& x) { return cumsum(x[0], 2); }));  // both raise
}

TEST(SortTorch, SortArgsortTopk) {
  EXPECT_TRUE(sweep_torch("torch.sort(a, dim=1)", {{{3, 5}}, {{2, 4, 3}}, {{0, 4}}, {{3, 0}}},
                          [](const V& x) {
                            auto [values, indices] = sort(x[0], 1);
                            return V{values, indices};
                          }));
  EXPECT_TRUE(sweep_torch("torch.sort(a, dim=0, descending=True, stable=True)",
                          {{{6}}, {{}}, {{4, 3}}},
                          [](const V& x) {
                            auto [values, indices] = sort(x[0], 0, true, true);
                            return V{values, indices};
                          }));
  EXPECT_TRUE(sweep_torch("torch.argsort(a, dim=-1, descending=True)", {{{3, 5}}, {{}}},
                          [](const V& x) { return argsort(x[0], -1, true); }));
  EXPECT_TRUE(sweep_torch("torch.topk(a, 3, dim=-1)", {{{4, 6}}, {{3}}, {{2, 3, 5}}},
                          [](const V& x) {
                            auto [values, indices] = topk(x[0], 3, -1);
                            return V{values, indices};
                          }));
  EXPECT_TRUE(sweep_torch("torch.topk(a, 2, dim=0, largest=False)", {{{5, 3}}, {{2, 0}}},
                          [](const V& x) {
                            auto [values, indices] = topk(x[0], 2, 0, false);
                            return V{values, indices};
                          }));
  EXPECT_TRUE(sweep_torch("torch.topk(a, 0)", {{{4}}, {{}}},
                          [](const V& x) {
                            auto [values, indices] = topk(x[0], 0);
                            return V{values, indices};
                          }));
  EXPECT_TRUE(sweep_torch("torch.topk(a, 5)", {{{4}}},
                          [](const V& x) {
                            auto [values, indices] = topk(x[0], 5);
                            return V{values, indices};
                          }));  // k too large: both raise
}

TEST(ScanGrad, FiniteDifferences) {
  Tensor x = uniform({3, 4}, 0.5, 2.0, 3);
  x.set_requires_grad();
  EXPECT_TRUE(gradcheck([](const V& in) { return cumsum(in[0], 0); }, {x}));
  EXPECT_TRUE(gradgradcheck([](const V& in) { return cumsum(in[0], 1); }, {x}));
  EXPECT_TRUE(gradcheck([](const V& in) { return cumprod(in[0], -1); }, {x}));
  EXPECT_TRUE(gradcheck([](const V& in) { return std::get<0>(sort(in[0], 1, true)); }, {x}));
  EXPECT_TRUE(gradcheck([](const V& in) { return std::get<0>(topk(in[0], 2, 0)); }, {x}));
}

TEST(Scan, BadInputNamesTheOp) {
  EXPECT_HAS(error_of([] { cumsum(uniform({2, 3}), 2); }), "[cumsum]");
  EXPECT_HAS(error_of([] { topk(uniform({4}), 5); }), "0 <= k <= 4");
  EXPECT_HAS(error_of([] { topk(ones({3}, DType::boolean), 1); }), "[topk]");
  // bf16 runs in f32, rounded at the end (exact here: small integers).
  Tensor counts = cumsum(make({1, 2, 3, 4}, {4}).to(DType::bf16), 0);
  EXPECT_EQ(counts.dtype(), DType::bf16);
  EXPECT_EQ(counts.to(DType::f64).to_vector<double>(), (std::vector<double>{1, 3, 6, 10}));
}

TESSERA_SBP_CASE("cumsum", [] { return V{uniform({5, 7}, -1, 1, 1)}; },
                 Attrs{{"dim", int64_t{1}}, {"reverse", false}});
TESSERA_SBP_CASE("cumprod", [] { return V{uniform({5, 7}, -1, 1, 2)}; }, Attrs{{"dim", int64_t{0}}});
TESSERA_SBP_CASE("cumprod_backward",
                 [] {
                   Tensor x = uniform({4, 5}, -1, 1, 3);
                   return V{uniform({4, 5}, -1, 1, 4), x, cumprod(x, 1)};
                 },
                 Attrs{{"dim", int64_t{1}}});
TESSERA_SBP_CASE("sort", [] { return V{uniform({5, 6}, -1, 1, 5)}; },
                 Attrs{{"dim", int64_t{1}}, {"descending", true}, {"stable", false}});
TESSERA_SBP_CASE("topk", [] { return V{uniform({5, 6}, -1, 1, 6)}; },
                 Attrs{{"k", int64_t{2}}, {"dim", int64_t{0}}, {"largest", true}, {"sorted", true}});

}  // namespace
}  // namespace tessera::testing
