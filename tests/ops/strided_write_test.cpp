#include "testing.h"
#include "torch_check.h"

namespace tessera::testing {
namespace {

Tensor iota(const Shape& shape) { return arange(0, numel(shape)).to(DType::f64).reshape(shape); }

TEST(StridedWrite, CopyIntoATransposedViewWritesTheBase) {
  Tensor x = zeros({2, 3}, DType::f64);
  x.t().copy_(iota({3, 2}));  // x.t()[i][j] = 2 * i + j
  EXPECT_TRUE(all_close(x, {0, 2, 4, 1, 3, 5}));
  const uint64_t before = x.version();
  x.t().slice(0, 0, 3, 2).fill_(-1.0);  // rows 0 and 2 of the transpose
  EXPECT_TRUE(all_close(x, {-1, 2, -1, -1, 3, -1}));
  EXPECT_GT(x.version(), before);
}

TEST(StridedWrite, CopyBroadcastsAndCastsTheSource) {
  Tensor x = zeros({3, 4}, DType::f32);
  // A column view (stride 4), from an i64 row broadcast along it.
  x.select(1, 2).copy_(Tensor::from_vector<int64_t>({7}, {1}));
  EXPECT_TRUE(all_close(x, {0, 0, 7, 0, 0, 0, 7, 0, 0, 0, 7, 0}));
  Tensor y = zeros({2, 3, 4}, DType::i32);
  y.permute({2, 0, 1}).slice(0, 1, 3).copy_(make({1.5, 2.5, 3.5}, {3}));
  std::vector<int32_t> values = y.to_vector<int32_t>();
  for (int64_t i = 0; i < 24; ++i) {
    const int64_t last = i % 4;
    const int64_t middle = (i / 4) % 3;
    const int32_t want = last == 1 || last == 2 ? static_cast<int32_t>(middle + 1) : 0;
    EXPECT_EQ(values[static_cast<size_t>(i)], want) << "element " << i;
  }
  // Bool and 0-d destinations.
  Tensor flags = zeros({2, 2}, DType::boolean);
  flags.t().select(0, 1).fill_(1.0);
  EXPECT_EQ(flags.to_vector<int64_t>(), (std::vector<int64_t>{0, 1, 0, 1}));
  Tensor grid = iota({2, 2});
  grid.select(0, 1).select(0, 0).fill_(9.0);
  EXPECT_TRUE(all_close(grid, {0, 1, 9, 3}));
}

TEST(StridedWrite, SourcesThatShareTheDestinationsMemoryAreReadFirst) {
  Tensor x = iota({3, 3});
  x.t().copy_(x);  // transposes in place, as PyTorch's copy_ does
  EXPECT_TRUE(all_close(x, {0, 3, 6, 1, 4, 7, 2, 5, 8}));
  Tensor empty_view = iota({0, 3}).t();
  empty_view.copy_(make({1.0}));
  EXPECT_EQ(empty_view.numel(), 0);
}

TEST(StridedWrite, ExpandedOrMismatchedDestinationsAreRefused) {
  Tensor x = zeros({3}, DType::f64);
  EXPECT_HAS(error_of([&] { x.unsqueeze(0).expand({2, 3}).copy_(iota({2, 3})); }),
             "[copy_] more than one element of the destination (shape [2, 3], strides [0, 1])");
  EXPECT_HAS(error_of([&] { iota({2, 3}).t().copy_(iota({2, 3})); }),
             "[copy_] shapes cannot be broadcast: [2, 3] and [3, 2]");
  EXPECT_HAS(error_of([&] { iota({1, 3}).t().copy_(iota({3, 2})); }),
             "does not broadcast to the destination's shape [3, 1]");
}

TEST(StridedWrite, WritesIntoViewsRecordAGradientOnTheBase) {
  // z = b * 1; z.t()[1:3] = a (broadcast): a gets the written region's
  // gradient, b what was not overwritten.
  EXPECT_TRUE(matches_torch("(lambda z: (z.t()[1:3].copy_(a), z)[1])(b * 1)",
                            {uniform({3}), uniform({3, 4})}, [](const Inputs& x) {
                              Tensor z = mul(x[1], 1.0);
                              z.t().slice(0, 1, 3).copy_(x[0]);
                              return z;
                            }));
  EXPECT_TRUE(matches_torch("(lambda z: (z[:, 1].fill_(2.0), z * z)[1])(a * 3)",
                            {uniform({2, 3})}, [](const Inputs& x) {
                              Tensor z = mul(x[0], 3.0);
                              z.select(1, 1).fill_(2.0);
                              return mul(z, z);
                            }));
  // A plain base that does not require grad starts to once a tracked source
  // is written into a view of it.
  EXPECT_TRUE(matches_torch("(lambda z: (z[1:].copy_(a), z.sum(0))[1])"
                            "(torch.zeros(3, 2, dtype=torch.float64))",
                            {uniform({2, 2})}, [](const Inputs& x) {
                              Tensor z = zeros({3, 2}, DType::f64);
                              z.slice(0, 1, 3).copy_(x[0]);
                              return sum(z, {0});
                            }));
}

}  // namespace
}  // namespace tessera::testing
