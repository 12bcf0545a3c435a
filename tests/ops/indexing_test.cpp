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
  EXPECT_HAS(error_of([&] { x.index_put_({gt(x, 0.0)}, 1.0); }), "not supported by index_put_");
  EXPECT_TRUE(matches_torch("(lambda z: (z.__setitem__((slice(1, 3),), b), z)[1])(a * 2)",
                            {uniform({3, 2}), uniform({2})}, [](const Inputs& in) {
                              Tensor z = mul(in[0], 2.0);
                              z.index_put_({Slice(1, 3)}, in[1]);
                              return z;
                            }));
}

}  // namespace
}  // namespace tessera::testing
