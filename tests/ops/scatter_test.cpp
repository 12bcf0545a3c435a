// scatter (src, value, reduce) and scatter_reduce (sum, prod, mean, amax,
// amin; include_self): PyTorch's documented examples by hand, then values
// and gradients against PyTorch in the same run, ties and zeros included.

#include <cmath>
#include <string>

#include "testing.h"
#include "torch_check.h"

namespace tessera::testing {
namespace {

Tensor ints(const std::vector<int64_t>& values, const Shape& shape) {
  return Tensor::from_vector(values, shape);
}

TEST(Scatter, DocumentedExamples) {
  // torch.scatter's docs: src = arange(1, 11).reshape(2, 5).
  Tensor src = make({1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, {2, 5});
  Tensor out = scatter(zeros({3, 5}, DType::f64), 0, ints({0, 1, 2, 0}, {1, 4}), src);
  EXPECT_TRUE(all_close(out, {1, 0, 0, 4, 0, 0, 2, 0, 0, 0, 0, 0, 3, 0, 0}));
  out = scatter(zeros({3, 5}, DType::f64), 1, ints({0, 1, 2, 0, 1, 4}, {2, 3}), src);
  EXPECT_TRUE(all_close(out, {1, 2, 3, 0, 0, 6, 7, 0, 0, 8, 0, 0, 0, 0, 0}));
  out = scatter(full({2, 4}, 2.0, DType::f64), 1, ints({1, 2}, {2, 1}), 1.23);
  EXPECT_TRUE(all_close(out, {2, 1.23, 2, 2, 2, 2, 1.23, 2}));
  out = scatter(full({2, 4}, 2.0, DType::f64), 1, ints({2, 3}, {2, 1}), full({2, 1}, 1.23, DType::f64),
                "multiply");
  EXPECT_TRUE(all_close(out, {2, 2, 2.46, 2, 2, 2, 2, 2.46}));
  // Repeated positions: the last entry in index order wins.
  out = scatter(zeros({3}, DType::f64), 0, ints({1, 1, 1}, {3}), make({7, 8, 9}, {3}));
  EXPECT_TRUE(all_close(out, {0, 9, 0}));

  // torch.scatter_reduce's docs.
  Tensor values = make({1, 2, 3, 4, 5, 6}, {6});
  Tensor index = ints({0, 1, 0, 1, 2, 1}, {6});
  Tensor input = make({1, 2, 3, 4}, {4});
  EXPECT_TRUE(all_close(scatter_reduce(input, 0, index, values, "sum"), {5, 14, 8, 4}));
  EXPECT_TRUE(all_close(scatter_reduce(input, 0, index, values, "amax", false), {3, 6, 5, 4}));
  EXPECT_TRUE(all_close(scatter_reduce(input, 0, index, values, "mean"), {5.0 / 3, 3.5, 4, 4}));
  EXPECT_TRUE(all_close(scatter_reduce(input, 0, index, values, "prod", false), {3, 48, 5, 4}));
  EXPECT_TRUE(all_close(scatter_reduce(input, 0, index, values, "amin"), {1, 2, 3, 4}));
}

TEST(Scatter, IntegerMeansRoundDown) {
  Tensor x = Tensor::from_vector<int64_t>({0, 0, 10}, {3});
  Tensor src = Tensor::from_vector<int64_t>({-3, -4, 4, 5}, {4});
  Tensor out = scatter_reduce(x, 0, ints({0, 0, 1, 1}, {4}), src, "mean", false);
  EXPECT_EQ(out.to_vector<int64_t>(), (std::vector<int64_t>{-4, 4, 10}));
  out = scatter_reduce(x, 0, ints({0, 0, 1, 1}, {4}), src, "mean", true);
  EXPECT_EQ(out.to_vector<int64_t>(), (std::vector<int64_t>{-3, 3, 10}));
}

TEST(Scatter, ErrorsNameTheOp) {
  Tensor x = zeros({3, 4}, DType::f32);
  EXPECT_HAS(error_of([&] { scatter(x, 0, ints({3}, {1, 1}), ones({1, 1}, DType::f32)); }), "[scatter] index 3 is out of range for dim 0 of size 3");
  EXPECT_HAS(error_of([&] { scatter(x, 0, ints({0}, {1, 1}), ones({1, 1}, DType::f64)); }), "[scatter] expects src of x's dtype f32, got f64");
  EXPECT_HAS(error_of([&] { scatter_reduce(x, 0, ints({0}, {1, 1}), ones({1, 1}, DType::f32), "max"); }), "[scatter_reduce] unknown reduce 'max'; valid: sum, prod, mean, amax, amin");
  EXPECT_HAS(error_of([&] { scatter(x, 2, ints({0}, {1, 1}), ones({1, 1}, DType::f32)); }), "[scatter]");
  EXPECT_HAS(error_of([&] { scatter(x, 0, ints({0, 0}, {2}), ones({2}, DType::f32)); }), "[scatter] x, index and src must have the same number of dims");
  EXPECT_HAS(error_of([&] { scatter(x, 0, ints({0}, {1, 1}), ones({1, 1}, DType::f32), "max"); }), "[scatter] unknown reduce 'max'");
}

TEST(Scatter, SourceLargerThanIndexGetsZeroGradientBeyondIt) {
  Tensor x = uniform({3, 4}).requires_grad_(true);
  Tensor src = uniform({3, 5}, -1, 1, 2).requires_grad_(true);
  Tensor index = ints({0, 2, 1, 0, 1, 1, 0, 2}, {2, 4});
  sum(scatter_reduce(x, 0, index, src, "sum")).backward();
  Tensor grad = src.grad();
  EXPECT_TRUE(all_close(grad, {1, 1, 1, 1, 0, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0}));
}

using V = std::vector<Tensor>;

TEST(ScatterTorch, SrcAndValue) {
  Tensor index = ints({0, 2, 1, 2, 1, 0, 0, 1}, {2, 4});  // positions unique per column
  Tensor x = uniform({3, 4}), src = uniform({2, 5}, -1, 1, 3);
  EXPECT_TRUE(matches_torch("torch.scatter(a, 0, b, c)", {x, index, src},
                            [](const V& v) { return scatter(v[0], 0, v[1], v[2]); }));
  EXPECT_TRUE(matches_torch("torch.scatter(a, -2, b, 0.5)", {x, index},
                            [](const V& v) { return scatter(v[0], -2, v[1], 0.5); }));
  Tensor rows = ints({3, 0, 1, 2, 1, 0}, {2, 3});
  EXPECT_TRUE(matches_torch("torch.scatter(a, 1, b, c)", {uniform({2, 4}), rows, uniform({2, 3})},
                            [](const V& v) { return scatter(v[0], 1, v[1], v[2]); }));
  // 0-d and empty operands, an i32 index.
  EXPECT_TRUE(matches_torch("torch.scatter(a, 0, b, c)",
                            {make({1.5}), ints({0}, {}), make({2.5})},
                            [](const V& v) { return scatter(v[0], 0, v[1], v[2]); }));
  EXPECT_TRUE(matches_torch("torch.scatter(a, 0, b, c)",
                            {uniform({3, 4}), ints({}, {0, 4}), uniform({0, 4})},
                            [](const V& v) { return scatter(v[0], 0, v[1], v[2]); }));
  // PyTorch takes only i64 indices here; Tessera also takes i32, as its other index ops do.
  EXPECT_TRUE(matches_torch("torch.scatter(a, 0, b.long(), c)", {x, index.to(DType::i32), src},
                            [](const V& v) { return scatter(v[0], 0, v[1], v[2]); }));
  EXPECT_TRUE(matches_torch("torch.scatter(a, 0, b, c, reduce='add')", {x, index, src},
                            [](const V& v) { return scatter(v[0], 0, v[1], v[2], "add"); },
                            {.grad = false}));
  // Out of range and a dtype mismatch: both sides raise.
  EXPECT_TRUE(matches_torch("torch.scatter(a, 0, b, c)", {x, ints({3}, {1, 1}), src},
                            [](const V& v) { return scatter(v[0], 0, v[1], v[2]); }));
}

TEST(ScatterTorch, ReduceEveryModeWithAndWithoutSelf) {
  // Repeated positions, so entries meet; ties (equal values) for amax/amin.
  Tensor index = ints({0, 2, 1, 2, 0, 0, 1, 2, 0, 2, 1, 2}, {3, 4});
  Tensor x = uniform({3, 5}, -1, 1, 4);
  Tensor src = uniform({3, 4}, -1, 1, 5);
  Tensor tied_x = make({1, 2, 3, 4, 5, 1, 2, 3, 4, 5, 1, 2, 3, 4, 5}, {3, 5});
  Tensor tied_src = make({1, 2, 3, 4, 1, 2, 3, 4, 3, 2, 1, 4}, {3, 4});
  Tensor zero_src = make({0, 2, 3, 0, 0, 2, 0.5, 0, 3, 2, 1, 4}, {3, 4});
  for (const std::string reduce : {"sum", "prod", "mean", "amax", "amin"}) {
    for (bool include_self : {true, false}) {
      const std::string expression = "torch.scatter_reduce(a, 0, b, c, '" + reduce +
                                     "', include_self=" + (include_self ? "True" : "False") + ")";
      auto fn = [reduce, include_self](const V& v) {
        return scatter_reduce(v[0], 0, v[1], v[2], reduce, include_self);
      };
      EXPECT_TRUE(matches_torch(expression, {x, index, src}, fn)) << reduce;
      EXPECT_TRUE(matches_torch(expression, {tied_x, index, tied_src}, fn)) << reduce;
      EXPECT_TRUE(matches_torch(expression, {tied_x, index, zero_src}, fn)) << reduce;
      EXPECT_TRUE(matches_torch(expression, {non_contiguous_copy(x), index, non_contiguous_copy(src)},
                                fn))
          << reduce;
      EXPECT_TRUE(matches_torch(expression,
                                {Tensor::from_vector<int64_t>({4, -3, 7, 0, 2, -8, 1, 1, 5, 6, 0, 0,
                                                               3, 2, -1},
                                                              {3, 5}),
                                 index,
                                 Tensor::from_vector<int64_t>({3, -5, 2, 1, 0, 9, -2, 4, 1, 1, -7, 3},
                                                              {3, 4})},
                                fn))
          << reduce;
    }
  }
  // Along the last dim, a 1-D case, and NaN reaching amax.
  EXPECT_TRUE(matches_torch("torch.scatter_reduce(a, -1, b, c, 'amax')",
                            {uniform({2, 3}), ints({0, 0, 2, 1, 1, 1}, {2, 3}), uniform({2, 3})},
                            [](const V& v) { return scatter_reduce(v[0], -1, v[1], v[2], "amax"); }));
  EXPECT_TRUE(matches_torch(
      "torch.scatter_reduce(a, 0, b, c, 'amin', include_self=False)",
      {make({1, 2, 3}, {3}), ints({0, 0, 2}, {3}), make({std::nan(""), 5, 1}, {3})},
      [](const V& v) { return scatter_reduce(v[0], 0, v[1], v[2], "amin", false); },
      {.grad = false}));
}

// Each rank scatters the rows (dim 1 scattered) it holds.
TESSERA_SBP_CASE(
    "scatter",
    [] {
      return std::vector<Tensor>{uniform({4, 5}, -1, 1, 5),
                                 ints({3, 0, 1, 4, 2, 2, 1, 0, 4, 3, 0, 1}, {4, 3}),
                                 uniform({4, 3}, -1, 1, 6)};
    },
    Attrs{{"dim", int64_t{1}}});
TESSERA_SBP_CASE(
    "scatter_reduce",
    [] {
      return std::vector<Tensor>{uniform({4, 5}, -1, 1, 5),
                                 ints({3, 0, 3, 4, 2, 2, 1, 0, 4, 3, 0, 0}, {4, 3}),
                                 uniform({4, 3}, -1, 1, 6)};
    },
    Attrs{{"dim", int64_t{1}}, {"reduce", std::string("amax")}, {"include_self", false}});

}  // namespace
}  // namespace tessera::testing
