// searchsorted and bucketize against PyTorch in the same run (sides,
// out_int32, sorter, batched sequences, NaN values, empty inputs) and the
// SBP checker.

#include <cmath>

#include "testing.h"
#include "torch_check.h"

namespace tessera::testing {
namespace {

TEST(SearchHand, FirstIndexNotBelowTheValue) {
  Tensor sequence = make({1, 3, 3, 5}, {4});
  EXPECT_EQ(searchsorted(sequence, make({0, 3, 4, 6}, {4})).to_vector<int64_t>(),
            (std::vector<int64_t>{0, 1, 3, 4}));
  EXPECT_EQ(searchsorted(sequence, make({3.0}), false, true).to_vector<int64_t>(),
            (std::vector<int64_t>{3}));
}

TEST(SearchTorch, SearchsortedBucketize) {
  Tensor sequence = make({-1, -0.5, 0, 0, 0.5, 1}, {6});
  Tensor rows = make({-1, 0, 1, -0.2, 0.2, 0.4}, {2, 3});
  Tensor values = make({-2, -1, -0.5, 0, 0.3, 1, 3, std::nan("")}, {2, 4});
  TorchOptions no_grad;
  no_grad.grad = false;
  EXPECT_TRUE(matches_torch("torch.searchsorted(a, b)", {sequence, values},
                            [](const Inputs& x) { return searchsorted(x[0], x[1]); }, no_grad));
  EXPECT_TRUE(matches_torch("torch.searchsorted(a, b, right=True, out_int32=True)",
                            {sequence, values},
                            [](const Inputs& x) { return searchsorted(x[0], x[1], true, true); },
                            no_grad));
  EXPECT_TRUE(matches_torch("torch.searchsorted(a, b, side='right')", {rows, values.narrow(1, 0, 3)},
                            [](const Inputs& x) {
                              return searchsorted(x[0], x[1], false, false, "right");
                            },
                            no_grad));
  EXPECT_TRUE(matches_torch("torch.searchsorted(a, b, side='left', right=True)", {sequence, values},
                            [](const Inputs& x) {
                              return searchsorted(x[0], x[1], false, true, "left");
                            },
                            no_grad));
  EXPECT_TRUE(matches_torch("torch.searchsorted(a, b)", {rows, make({1, 2}, {2})},
                            [](const Inputs& x) { return searchsorted(x[0], x[1]); }, no_grad));
  Tensor unsorted = make({0.5, -1, 1, 0}, {4});
  Tensor sorter = Tensor::from_vector<int64_t>({1, 3, 0, 2}, {4});
  EXPECT_TRUE(matches_torch("torch.searchsorted(a, b, sorter=c)", {unsorted, values, sorter},
                            [](const Inputs& x) {
                              return searchsorted(x[0], x[1], false, false, std::nullopt, x[2]);
                            },
                            no_grad));
  EXPECT_TRUE(matches_torch("torch.bucketize(a, b)", {values, sequence},
                            [](const Inputs& x) { return bucketize(x[0], x[1]); }, no_grad));
  EXPECT_TRUE(matches_torch("torch.bucketize(a, b, right=True)", {make({}, {0}), sequence},
                            [](const Inputs& x) { return bucketize(x[0], x[1], false, true); },
                            no_grad));
  EXPECT_TRUE(matches_torch("torch.bucketize(a, b)", {make({0.1}), sequence},
                            [](const Inputs& x) { return bucketize(x[0], x[1]); }, no_grad));
  EXPECT_THROW(searchsorted(sequence, values, false, false, "middle"), Error);
  EXPECT_THROW(bucketize(values, rows), Error);
}

TESSERA_SBP_CASE(
    "searchsorted",
    [] {
      return std::vector<Tensor>{make({-1, -0.5, 0, 0.5, 1}, {5}), uniform({4, 6}, -1, 1, 7)};
    },
    Attrs{{"right", false}, {"out_int32", false}});
TESSERA_SBP_CASE(
    "searchsorted",
    [] {
      return std::vector<Tensor>{cumsum(uniform({4, 5}, 0, 1, 8), 1), uniform({4, 3}, 0, 2, 9)};
    },
    Attrs{{"right", true}, {"out_int32", true}});

}  // namespace
}  // namespace tessera::testing
