// flip, roll, repeat, tile, repeat_interleave, movedim, t, swapaxes,
// unbind, take_along_dim, nonzero, masked_select, index_fill: hand values
// and PyTorch in the same run (values and gradients; 0-d, empty, negative
// dims, non-contiguous inputs).

#include "testing.h"
#include "torch_check.h"

namespace tessera::testing {
namespace {

using V = std::vector<Tensor>;

TEST(ShapeOps, HandValues) {
  Tensor x = make({1, 2, 3, 4, 5, 6}, {2, 3});
  EXPECT_TRUE(all_close(flip(x, {1}), make({3, 2, 1, 6, 5, 4}, {2, 3})));
  EXPECT_TRUE(all_close(roll(x, {1}, {1}), make({3, 1, 2, 6, 4, 5}, {2, 3})));
  EXPECT_TRUE(all_close(roll(x, {-1}), make({2, 3, 4, 5, 6, 1}, {2, 3})));
  EXPECT_TRUE(all_close(repeat(make({1, 2}, {2}), {2, 2}), make({1, 2, 1, 2, 1, 2, 1, 2}, {2, 4})));
  EXPECT_TRUE(all_close(repeat_interleave(make({1, 2}, {2}), 2), make({1, 1, 2, 2}, {4})));
  EXPECT_EQ(movedim(zeros({2, 3, 4}), 0, -1).shape(), (Shape{3, 4, 2}));
  EXPECT_EQ(nonzero(make({0, 1, 0, 2}, {2, 2})).to_vector<int64_t>(),
            (std::vector<int64_t>{0, 1, 1, 1}));
  EXPECT_TRUE(all_close(masked_select(x, gt(x, 4.0)), make({5, 6}, {2})));
  EXPECT_TRUE(all_close(index_fill(x, 1, Tensor::from_vector<int64_t>({0, -1}, {2}), -1.0),
                        make({-1, 2, -1, -1, 5, -1}, {2, 3})));
}

TEST(ShapeOpsTorch, FlipRollRepeatTile) {
  EXPECT_TRUE(sweep_torch("torch.flip(a, [0, -1])", {{{3, 4}}, {{2, 3, 4}}, {{0, 3}}},
                          [](const V& x) { return flip(x[0], {0, -1}); }));
  EXPECT_TRUE(sweep_torch("torch.flip(a, [])", {{{}}, {{3}}},
                          [](const V& x) { return flip(x[0], {}); }));
  EXPECT_TRUE(sweep_torch("torch.flip(a, [0, 0])", {{{3}}},
                          [](const V& x) { return flip(x[0], {0, 0}); }));
  EXPECT_TRUE(sweep_torch("torch.roll(a, 2)", {{{5}}, {{3, 4}}, {{}}, {{0}}},
                          [](const V& x) { return roll(x[0], {2}); }));
  EXPECT_TRUE(sweep_torch("torch.roll(a, (1, -3), (0, -1))", {{{3, 4}}, {{2, 3, 5}}, {{0, 2}}},
                          [](const V& x) { return roll(x[0], {1, -3}, {0, -1}); }));
  EXPECT_TRUE(sweep_torch("a.repeat(2, 1, 3)", {{{3, 4}}, {{4}}, {{}}, {{0, 2}}, {{2, 1, 2}}},
                          [](const V& x) { return repeat(x[0], {2, 1, 3}); }));
  EXPECT_TRUE(sweep_torch("a.repeat(2)", {{{3, 4}}},
                          [](const V& x) { return repeat(x[0], {2}); }));  // both raise
  EXPECT_TRUE(sweep_torch("torch.tile(a, (2,))", {{{3, 4}}, {{3}}, {{}}},
                          [](const V& x) { return tile(x[0], {2}); }));
  EXPECT_TRUE(sweep_torch("torch.tile(a, (2, 0, 1))", {{{3, 4}}},
                          [](const V& x) { return tile(x[0], {2, 0, 1}); }));
}

TEST(ShapeOpsTorch, RepeatInterleaveMovedimUnbind) {
  EXPECT_TRUE(sweep_torch("torch.repeat_interleave(a, 3, dim=1)", {{{2, 3}}, {{2, 0}}},
                          [](const V& x) { return repeat_interleave(x[0], 3, 1); }));
  EXPECT_TRUE(sweep_torch("torch.repeat_interleave(a, 2)", {{{2, 3}}, {{}}},
                          [](const V& x) { return repeat_interleave(x[0], 2); }));
  EXPECT_TRUE(matches_torch(
      "torch.repeat_interleave(a, torch.tensor([1, 0, 2]), dim=0)", {uniform({3, 2})},
      [](const V& x) {
        return repeat_interleave(x[0], Tensor::from_vector<int64_t>({1, 0, 2}, {3}), 0);
      }));
  EXPECT_TRUE(matches_torch("torch.repeat_interleave(torch.tensor([2, 0, 1]))", {},
                            [](const V&) {
                              return repeat_interleave(Tensor::from_vector<int64_t>({2, 0, 1}, {3}));
                            }));
  EXPECT_TRUE(sweep_torch("torch.movedim(a, (0, 1), (2, 0))", {{{2, 3, 4}}, {{0, 3, 1}}},
                          [](const V& x) { return movedim(x[0], {0, 1}, {2, 0}); }));
  EXPECT_TRUE(sweep_torch("torch.moveaxis(a, -1, 0)", {{{2, 3, 4}}, {{}}},
                          [](const V& x) { return moveaxis(x[0], -1, 0); }));
  EXPECT_TRUE(sweep_torch("torch.t(a)", {{{2, 3}}, {{3}}, {{}}, {{2, 3, 4}}},
                          [](const V& x) { return t(x[0]); }));
  EXPECT_TRUE(sweep_torch("torch.swapaxes(a, 0, -1)", {{{2, 3, 4}}},
                          [](const V& x) { return swapaxes(x[0], 0, -1); }));
  EXPECT_TRUE(sweep_torch("torch.unbind(a, 1)", {{{2, 3}}, {{2, 0}}, {{}}},
                          [](const V& x) { return unbind(x[0], 1); }));
}

TEST(ShapeOpsTorch, SelectionOps) {
  Tensor idx = Tensor::from_vector<int64_t>({2, 0, 1, 1, 0, 2}, {3, 2});
  EXPECT_TRUE(matches_torch("torch.take_along_dim(a, b, dim=1)", {uniform({3, 4}), idx},
                            [](const V& x) { return take_along_dim(x[0], x[1], 1); }));
  EXPECT_TRUE(matches_torch("torch.take_along_dim(a, b)", {uniform({3, 4}), idx},
                            [](const V& x) { return take_along_dim(x[0], x[1]); }));
  EXPECT_TRUE(matches_torch("torch.take_along_dim(a, b, dim=0)",
                            {uniform({4, 1}), Tensor::from_vector<int64_t>({3, 0, 1}, {1, 3})},
                            [](const V& x) { return take_along_dim(x[0], x[1], 0); }));
  Tensor mixed = make({0, 1.5, 0, -2, 0, 3}, {2, 3});
  EXPECT_TRUE(matches_torch("torch.nonzero(a)", {mixed}, [](const V& x) { return nonzero(x[0]); }));
  EXPECT_TRUE(matches_torch("torch.nonzero(a, as_tuple=True)", {mixed},
                            [](const V& x) { return nonzero_tuple(x[0]); }));
  EXPECT_TRUE(matches_torch("torch.nonzero(a)", {make({2.0})},
                            [](const V& x) { return nonzero(x[0]); }));
  EXPECT_TRUE(matches_torch("torch.nonzero(a)", {zeros({0, 3}, DType::f64)},
                            [](const V& x) { return nonzero(x[0]); }));
  EXPECT_TRUE(matches_torch("torch.masked_select(a, b > 0)", {uniform({3, 4}), uniform({4}, -1, 1, 7)},
                            [](const V& x) { return masked_select(x[0], gt(x[1], 0.0)); }));
  EXPECT_TRUE(matches_torch("torch.masked_select(a, b > 0)", {uniform({}), uniform({3}, -1, 1, 8)},
                            [](const V& x) { return masked_select(x[0], gt(x[1], 0.0)); }));
  Tensor fill_index = Tensor::from_vector<int64_t>({0, -1}, {2});
  EXPECT_TRUE(matches_torch("torch.index_fill(a, 1, torch.tensor([0, -1]), -2.5)",
                            {uniform({3, 4})},
                            [&](const V& x) { return index_fill(x[0], 1, fill_index, -2.5); }));
  EXPECT_TRUE(matches_torch("torch.index_fill(a, 0, torch.tensor(0), b)", {uniform({3, 2}), make({4.0})},
                            [](const V& x) {
                              return index_fill(x[0], 0, Tensor::from_vector<int64_t>({0}, {}), x[1]);
                            }));
}

TEST(ShapeOps, BadInputNamesTheOp) {
  EXPECT_HAS(error_of([] { roll(zeros({3}), {1, 2}, {0}); }), "[roll]");
  EXPECT_HAS(error_of([] { repeat(zeros({2, 3}), {2}); }), "tile()");
  EXPECT_HAS(error_of([] { t(zeros({2, 3, 4})); }), "[t]");
  EXPECT_HAS(error_of([] { masked_select(zeros({3}), zeros({3})); }), "mask must be bool");
  EXPECT_HAS(error_of([] {
               index_fill(zeros({3}), 0, Tensor::from_vector<int64_t>({3}, {1}), 1.0);
             }),
             "out of range");
}

}  // namespace
}  // namespace tessera::testing
