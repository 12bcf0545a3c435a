#include "tessera/ops/indexing.h"
#include "testing.h"
#include "torch_check.h"

namespace tessera::testing {
namespace {

using indexing::Ellipsis;
using indexing::None;
using indexing::Slice;

Tensor iota(const Shape& shape) { return arange(0, numel(shape)).to(DType::f64).reshape(shape); }

TEST(Indexing, BasicIndicesAreViews) {
  Tensor x = iota({3, 4});
  Tensor column = x.index({Slice(), 1});
  EXPECT_EQ(column.shape(), (Shape{3}));
  EXPECT_TRUE(column.shares_storage(x));
  EXPECT_TRUE(all_close(column, {1, 5, 9}));
  EXPECT_TRUE(all_close(x.index({-1}), {8, 9, 10, 11}));
  EXPECT_EQ(x.index({Slice(1, 3), None, Ellipsis}).shape(), (Shape{2, 1, 4}));
  EXPECT_EQ(x.index({Ellipsis, None}).shape(), (Shape{3, 4, 1}));
  EXPECT_TRUE(all_close(x.index({Slice(None, None, 2), Slice(-2)}), {2, 3, 10, 11}));
  EXPECT_TRUE(all_close(x.index({Slice(std::nullopt, std::nullopt, 2), Slice(-2)}),
                        {2, 3, 10, 11}));
  EXPECT_HAS(error_of([&] { x.index({0, 0, 0}); }), "[index] too many indices");
  EXPECT_HAS(error_of([&] { x.index({3}); }),
             "[index] index 3 is out of bounds for dimension 0 with size 3");
  EXPECT_HAS(error_of([&] { x.index({Ellipsis, Ellipsis}); }), "a single ellipsis");
}

TEST(Indexing, IndexTensorsAndMasks) {
  Tensor x = iota({3, 4});
  Tensor rows = x.index({Tensor::from_vector<int64_t>({2, 0, -1, 2}, {2, 2})});
  EXPECT_EQ(rows.shape(), (Shape{2, 2, 4}));
  EXPECT_TRUE(all_close(rows.index({Slice(), Slice(), 0}), {8, 0, 8, 8}));
  Tensor mask = gt(x, 6.0);
  EXPECT_TRUE(all_close(x.index({mask}), {7, 8, 9, 10, 11}));
  Tensor row_mask = Tensor::from_vector<int64_t>({1, 0, 1}, {3}).to(DType::boolean);
  EXPECT_EQ(x.index({row_mask, Slice(1, 3)}).shape(), (Shape{2, 2}));
  EXPECT_HAS(error_of([&] { x.index({Slice(), row_mask}); }), "the shape of the mask [3]");
  EXPECT_TRUE(matches_torch("a[:, [2, 0]][1:] + a[a > 0].sum()", {uniform({3, 4})},
                            [](const Inputs& in) {
                              Tensor picked = in[0].index(
                                  {Slice(), Tensor::from_vector<int64_t>({2, 0}, {2})});
                              return add(picked.index({Slice(1)}),
                                         sum(in[0].index({gt(in[0], 0.0)})));
                            }));
}

TEST(Indexing, IndexPutWritesThroughTheView) {
  Tensor x = zeros({3, 4}, DType::f64);
  x.index_put_({Slice(1, 3)}, make({1, 2, 3, 4}, {4}));
  x.index_put_({0, Slice(None, None, 2)}, 7);
  x.index_put_({Ellipsis, -1}, make({-1.0}));
  EXPECT_TRUE(all_close(x, {7, 0, 7, -1, 1, 2, 3, -1, 1, 2, 3, -1}));
  EXPECT_TRUE(matches_torch("(lambda z: (z.__setitem__((slice(1, 3),), b), z)[1])(a * 2)",
                            {uniform({3, 2}), uniform({2})}, [](const Inputs& in) {
                              Tensor z = mul(in[0], 2.0);
                              z.index_put_({Slice(1, 3)}, in[1]);
                              return z;
                            }));
}

Tensor longs(const std::vector<int64_t>& values, const Shape& shape) {
  return Tensor::from_vector<int64_t>(values, shape);
}

TEST(IndexingTorch, AdvancedIndexing) {
  Tensor x = uniform({3, 4, 5});
  Tensor i = longs({2, 0, -1}, {3}), j = longs({1, 3, 0, 2, 1, 1}, {2, 3});
  auto same = [&](const std::string& expression, const Inputs& inputs,
                  std::function<Tensor(const Inputs&)> fn) {
    return matches_torch(expression, inputs, [fn](const Inputs& in) { return fn(in); });
  };
  // Adjacent index tensors broadcast and replace their dims in place.
  EXPECT_TRUE(same("a[b, c]", {x, i, j}, [](const Inputs& in) { return in[0].index({in[1], in[2]}); }));
  EXPECT_TRUE(same("a[:, b, c]", {x, i, j.narrow(1, 0, 3).narrow(0, 0, 1)},
                   [](const Inputs& in) { return in[0].index({Slice(), in[1], in[2]}); }));
  // Separated by a slice: the broadcast dims go first.
  EXPECT_TRUE(same("a[b, :, c]", {x, i, j},
                   [](const Inputs& in) { return in[0].index({in[1], Slice(), in[2]}); }));
  EXPECT_TRUE(same("a[..., b]", {x, j},
                   [](const Inputs& in) { return in[0].index({Ellipsis, in[1]}); }));
  EXPECT_TRUE(same("a[None, b, 1:3]", {x, j},
                   [](const Inputs& in) { return in[0].index({None, in[1], Slice(1, 3)}); }));
  // An integer beside index tensors is a plain select, as in PyTorch.
  EXPECT_TRUE(same("a[0, :, b]", {x, i},
                   [](const Inputs& in) { return in[0].index({0, Slice(), in[1]}); }));
  EXPECT_TRUE(same("a[b, 1, c]", {x, i, j},
                   [](const Inputs& in) { return in[0].index({in[1], 1, in[2]}); }));
  // Masks: 2-D, beside an index tensor, 0-d, and u8 (read as a mask).
  EXPECT_TRUE(same("a[a[:, :, 0] > 0]", {x},
                   [](const Inputs& in) { return in[0].index({in[0].index({Slice(), Slice(), 0}) > 0}); }));
  EXPECT_TRUE(same("a[a[:, 0, 0] > 0, c[0]]", {x, i, j}, [](const Inputs& in) {
    return in[0].index({in[0].index({Slice(), 0, 0}) > 0, in[2].select(0, 0)});
  }));
  EXPECT_TRUE(same("a[torch.tensor(True)]", {x}, [](const Inputs& in) {
    return in[0].index({Tensor::scalar(1.0, DType::f64).to(DType::boolean)});
  }));
  EXPECT_TRUE(same("a[torch.tensor(False), 1]", {x}, [](const Inputs& in) {
    return in[0].index({Tensor::scalar(0.0, DType::f64).to(DType::boolean), 1});
  }));
  EXPECT_TRUE(same("a[(a[:, 0, 0] > 0).to(torch.bool)]", {x}, [](const Inputs& in) {
    return in[0].index({(in[0].index({Slice(), 0, 0}) > 0).to(DType::u8)});
  }));
  // i32 indices, empty indices, and an out-of-range index on both sides.
  EXPECT_TRUE(same("a[b.long()]", {x, i.to(DType::i32)},
                   [](const Inputs& in) { return in[0].index({in[1]}); }));
  EXPECT_TRUE(same("a[:, b]", {x, longs({}, {0, 2})},
                   [](const Inputs& in) { return in[0].index({Slice(), in[1]}); }));
  EXPECT_TRUE(same("a[b, c]", {x, longs({3}, {1}), j},
                   [](const Inputs& in) { return in[0].index({in[1], in[2]}); }));
  EXPECT_TRUE(same("a[b, c]", {x, longs({0, 1}, {2}), j},
                   [](const Inputs& in) { return in[0].index({in[1], in[2]}); }));
}

TEST(IndexingTorch, IndexPutWithTensorsAndMasks) {
  Tensor x = uniform({3, 4});
  Tensor rows = longs({0, 2, 0}, {3}), cols = longs({1, 3, 1}, {3});
  // x[rows, cols] = v, and torch.index_put(..., accumulate=True) with a repeated position.
  EXPECT_TRUE(matches_torch("torch.index_put(a, (b, c), d, accumulate=True)",
                            {x, rows, cols, uniform({3}, -1, 1, 5)}, [](const Inputs& in) {
                              return index_put(in[0], {in[1], in[2]}, in[3], true);
                            }));
  EXPECT_TRUE(matches_torch("torch.index_put(a, (b,), c)", {x, longs({2, 1}, {2}), uniform({4})},
                            [](const Inputs& in) { return index_put(in[0], {in[1]}, in[2]); }));
  EXPECT_TRUE(matches_torch(
      "(lambda z: (z.__setitem__((slice(None), b), c), z)[1])(a * 2)",
      {x, longs({3, 0}, {2}), uniform({3, 2}, -1, 1, 6)}, [](const Inputs& in) {
        Tensor z = mul(in[0], 2.0);
        z.index_put_({Slice(), in[1]}, in[2]);
        return z;
      }));
  EXPECT_TRUE(matches_torch("(lambda z: (z.__setitem__(z > 0.5, b), z)[1])(a * 2)",
                            {x, make({-3.0})}, [](const Inputs& in) {
                              Tensor z = mul(in[0], 2.0);
                              z.index_put_({z > 0.5}, in[1]);
                              return z;
                            }));
  EXPECT_TRUE(matches_torch("(lambda z: (z.index_put_((b, c), d, accumulate=True), z)[1])(a + 0)",
                            {x, rows, cols, uniform({1}, -1, 1, 7)}, [](const Inputs& in) {
                              Tensor z = add(in[0], 0.0);
                              z.index_put_({in[1], in[2]}, in[3], true);
                              return z;
                            }));
  // Values that do not broadcast to the selection.
  EXPECT_HAS(error_of([&] { index_put(x, {rows}, uniform({2})); }),
             "[index_put] values of shape [2] cannot be broadcast to the indexing result of shape "
             "[3, 4]");
  // A bool mask with a scalar: x[x < 0] = 0.
  Tensor y = x.clone();
  y.index_put_({y < 0}, 0.0);
  EXPECT_TRUE(all_close(y, maximum(x, 0.0)));
}

}  // namespace
}  // namespace tessera::testing
