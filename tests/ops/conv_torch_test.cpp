// Convolution, pooling, padding and window ops against PyTorch in the same
// run: values, shapes, dtypes and gradients, with batched, unbatched and
// empty inputs.

#include "testing.h"
#include "torch_check.h"

namespace tessera::testing {
namespace {

using tessera::testing::matches_torch;
using tessera::testing::sweep_torch;
using V = std::vector<Tensor>;

TEST(PoolTorch, MaxPool) {
  EXPECT_TRUE(sweep_torch("F.max_pool2d(a, 3, stride=2, padding=1, ceil_mode=True)",
                          {{{2, 3, 7, 6}}, {{3, 8, 6}}, {{0, 2, 5, 5}}, {{1, 1, 2, 2}}},
                          [](const V& x) { return max_pool2d(x[0], 3, 2, 1, 1, true); }));
  EXPECT_TRUE(sweep_torch(
      "F.max_pool2d(a, (2, 3), stride=(2, 1), padding=(1, 1), dilation=(2, 1), ceil_mode=True, "
      "return_indices=True)",
      {{{2, 2, 7, 6}}, {{3, 5, 5}}},
      [](const V& x) {
        auto [values, indices] = max_pool2d_with_indices(x[0], {2, 3}, {2, 1}, {1, 1}, {2, 1}, true);
        return V{values, indices};
      }));
  EXPECT_TRUE(sweep_torch("F.max_pool2d(a, 2)", {{{4, 4}}, {{1, 0, 4, 4}}},
                          [](const V& x) { return max_pool2d(x[0], 2); }));
  EXPECT_TRUE(sweep_torch(
      "F.max_pool1d(a, 3, stride=2, padding=1, dilation=2, ceil_mode=True, return_indices=True)",
      {{{2, 3, 10}}, {{3, 9}}, {{0, 2, 7}}},
      [](const V& x) {
        auto [values, indices] = max_pool1d_with_indices(x[0], 3, 2, 1, 2, true);
        return V{values, indices};
      }));
  EXPECT_TRUE(sweep_torch("F.max_pool1d(a, 2)", {{{8}}, {{3, 8}}},
                          [](const V& x) { return max_pool1d(x[0], 2); }));
}

TEST(PoolTorch, AvgPool) {
  EXPECT_TRUE(sweep_torch(
      "F.avg_pool2d(a, 3, stride=2, padding=1, ceil_mode=True, count_include_pad=False)",
      {{{2, 3, 7, 6}}, {{3, 8, 6}}, {{0, 2, 5, 5}}},
      [](const V& x) { return avg_pool2d(x[0], 3, 2, 1, false, true); }));
  EXPECT_TRUE(sweep_torch(
      "F.avg_pool2d(a, (3, 2), stride=(2, 3), padding=(1, 1), ceil_mode=True, "
      "divisor_override=5)",
      {{{2, 6, 7}}, {{1, 2, 2, 2}}},
      [](const V& x) { return avg_pool2d(x[0], {3, 2}, {2, 3}, {1, 1}, true, true, 5); }));
  EXPECT_TRUE(sweep_torch(
      "F.avg_pool1d(a, 4, stride=3, padding=2, ceil_mode=True, count_include_pad=False)",
      {{{2, 3, 10}}, {{3, 10}}, {{0, 3, 10}}},
      [](const V& x) { return avg_pool1d(x[0], 4, 3, 2, false, true); }));
}

TEST(PoolTorch, AdaptivePool) {
  EXPECT_TRUE(sweep_torch("F.adaptive_max_pool2d(a, (3, 4), return_indices=True)",
                          {{{2, 3, 5, 7}}, {{3, 2, 9}}, {{0, 2, 5, 7}}, {{1, 0, 5, 7}}},
                          [](const V& x) {
                            auto [values, indices] = adaptive_max_pool2d_with_indices(x[0], {3, 4});
                            return V{values, indices};
                          }));
  EXPECT_TRUE(sweep_torch("F.adaptive_avg_pool2d(a, (3, 4))",
                          {{{2, 3, 5, 7}}, {{3, 2, 9}}, {{0, 2, 5, 7}}, {{2, 3, 0, 7}}},
                          [](const V& x) { return adaptive_avg_pool2d(x[0], {3, 4}); }));
  EXPECT_TRUE(sweep_torch("F.adaptive_avg_pool2d(a, (None, 2))", {{{2, 3, 5, 7}}},
                          [](const V& x) { return adaptive_avg_pool2d(x[0], {-1, 2}); }));
  EXPECT_TRUE(sweep_torch("F.adaptive_max_pool1d(a, 3)", {{{2, 3, 7}}, {{3, 5}}},
                          [](const V& x) { return adaptive_max_pool1d(x[0], 3); }));
  EXPECT_TRUE(sweep_torch("F.adaptive_avg_pool1d(a, 4)", {{{2, 3, 7}}, {{3, 5}}},
                          [](const V& x) { return adaptive_avg_pool1d(x[0], 4); }));
}

TEST(ConvTorch, Conv2dStringPaddingAndUnbatched) {
  EXPECT_TRUE(sweep_torch("F.conv2d(a, b, c, padding='same', dilation=(2, 1))",
                          {{{2, 3, 6, 5}, {4, 3, 2, 3}, {4}}, {{3, 6, 5}, {4, 3, 2, 3}, {4}},
                           {{0, 3, 6, 5}, {4, 3, 2, 3}, {4}}},
                          [](const V& x) {
                            return conv2d(x[0], x[1], x[2], {1, 1}, "same", {2, 1});
                          }));
  EXPECT_TRUE(sweep_torch("F.conv2d(a, b, c, stride=2, padding='valid', groups=2)",
                          {{{2, 4, 6, 5}, {4, 2, 2, 3}, {4}}, {{4, 6, 5}, {4, 2, 2, 3}, {4}}},
                          [](const V& x) { return conv2d(x[0], x[1], x[2], 2, "valid", 1, 2); }));
  EXPECT_TRUE(sweep_torch("F.conv2d(a, b, padding='same', stride=2)", {{{1, 2, 5, 5}, {3, 2, 3, 3}}},
                          [](const V& x) { return conv2d(x[0], x[1], {}, 2, "same"); }));
}

TEST(ConvTorch, Conv1dAndConv3d) {
  EXPECT_TRUE(sweep_torch("F.conv1d(a, b, c, stride=2, padding=1, dilation=2, groups=2)",
                          {{{2, 4, 9}, {6, 2, 3}, {6}}, {{4, 9}, {6, 2, 3}, {6}},
                           {{0, 4, 9}, {6, 2, 3}, {6}}},
                          [](const V& x) { return conv1d(x[0], x[1], x[2], 2, 1, 2, 2); }));
  EXPECT_TRUE(sweep_torch("F.conv1d(a, b, padding='same', dilation=3)",
                          {{{2, 4, 9}, {6, 4, 4}}, {{4, 9}, {6, 4, 4}}},
                          [](const V& x) { return conv1d(x[0], x[1], {}, 1, "same", 3); }));
  EXPECT_TRUE(sweep_torch(
      "F.conv3d(a, b, c, stride=(2, 1, 1), padding=(1, 0, 1), dilation=(1, 2, 1), groups=2)",
      {{{2, 4, 5, 6, 5}, {4, 2, 2, 2, 3}, {4}}, {{4, 5, 6, 5}, {4, 2, 2, 2, 3}, {4}}},
      [](const V& x) { return conv3d(x[0], x[1], x[2], {2, 1, 1}, {1, 0, 1}, {1, 2, 1}, 2); }));
  EXPECT_TRUE(sweep_torch("F.conv3d(a, b, padding='same')",
                          {{{1, 2, 4, 5, 4}, {3, 2, 2, 3, 2}}, {{0, 2, 4, 5, 4}, {3, 2, 2, 3, 2}}},
                          [](const V& x) { return conv3d(x[0], x[1], {}, 1, "same"); }));
}

TEST(ConvTorch, ConvTranspose) {
  EXPECT_TRUE(sweep_torch(
      "F.conv_transpose2d(a, b, c, stride=2, padding=1, output_padding=1, groups=2)",
      {{{2, 4, 3, 4}, {4, 3, 3, 3}, {6}}, {{4, 3, 4}, {4, 3, 3, 3}, {6}},
       {{0, 4, 3, 4}, {4, 3, 3, 3}, {6}}},
      [](const V& x) { return conv_transpose2d(x[0], x[1], x[2], 2, 1, 1, 2); }));
  EXPECT_TRUE(sweep_torch(
      "F.conv_transpose2d(a, b, c, stride=(1, 2), padding=(0, 1), output_padding=(1, 0), "
      "dilation=(2, 1))",
      {{{2, 3, 3, 4}, {3, 2, 3, 2}, {2}}},
      [](const V& x) {
        return conv_transpose2d(x[0], x[1], x[2], {1, 2}, {0, 1}, {1, 0}, 1, {2, 1});
      }));
  EXPECT_TRUE(sweep_torch("F.conv_transpose2d(a, b, stride=2, output_padding=2)",
                          {{{1, 2, 3, 3}, {2, 2, 3, 3}}},
                          [](const V& x) { return conv_transpose2d(x[0], x[1], {}, 2, 0, 2); }));
  EXPECT_TRUE(sweep_torch(
      "F.conv_transpose1d(a, b, c, stride=3, padding=1, output_padding=2, dilation=2)",
      {{{2, 3, 5}, {3, 2, 3}, {2}}, {{3, 5}, {3, 2, 3}, {2}}},
      [](const V& x) { return conv_transpose1d(x[0], x[1], x[2], 3, 1, 2, 1, 2); }));
}

TEST(ConvTorch, ExistingSignatures) {
  EXPECT_TRUE(sweep_torch("F.conv2d(a, b, c, stride=(2, 1), padding=(1, 2), dilation=(1, 2), groups=3)",
                          {{{2, 6, 7, 6}, {3, 2, 3, 2}, {3}}, {{6, 7, 6}, {3, 2, 3, 2}, {3}}},
                          [](const V& x) {
                            return conv2d(x[0], x[1], x[2], {2, 1}, {1, 2}, {1, 2}, 3);
                          }));
  EXPECT_TRUE(sweep_torch("F.conv2d(a, b)", {{{1, 3, 2, 2}, {4, 3, 3, 3}}, {{2, 2}, {4, 1, 1, 1}}},
                          [](const V& x) { return conv2d(x[0], x[1]); }));
  TorchOptions f32;
  f32.dtype = DType::f32;
  f32.rtol = 1e-4;
  f32.atol = 1e-5;
  f32.grad_rtol = 1e-3;
  f32.grad_atol = 1e-4;
  EXPECT_TRUE(sweep_torch("F.conv_transpose2d(a, b, c, stride=2, padding=1, output_padding=1)",
                          {{{2, 3, 4, 4}, {3, 5, 3, 3}, {5}}},
                          [](const V& x) { return conv_transpose2d(x[0], x[1], x[2], 2, 1, 1); },
                          f32));
  EXPECT_TRUE(sweep_torch("F.max_pool2d(a, 2)", {{{2, 3, 8, 8}}},
                          [](const V& x) { return max_pool2d(x[0], 2); }, f32));
  EXPECT_TRUE(sweep_torch("F.avg_pool2d(a, 3, stride=1, padding=1)", {{{2, 3, 5, 5}}, {{3, 5, 5}}},
                          [](const V& x) { return avg_pool2d(x[0], 3, 1, 1); }));
  EXPECT_TRUE(sweep_torch("F.pad(a, (1, -1, 0, 2), value=2.5)", {{{2, 3, 4}}, {{0, 3}}, {{5}}},
                          [](const V& x) { return pad(x[0], {1, -1, 0, 2}, "constant", 2.5); }));
  EXPECT_TRUE(sweep_torch("F.pad(a, (1, 2))", {{{}}, {{0}}, {{3}}},
                          [](const V& x) { return pad(x[0], {1, 2}); }));
}

TEST(UnfoldTorch, UnfoldFoldAndPixelShuffle) {
  EXPECT_TRUE(sweep_torch("F.unfold(a, (2, 3), dilation=(1, 2), padding=1, stride=(2, 1))",
                          {{{2, 3, 5, 6}}, {{3, 5, 6}}, {{0, 3, 5, 6}}},
                          [](const V& x) { return unfold(x[0], {2, 3}, {1, 2}, {1, 1}, {2, 1}); }));
  EXPECT_TRUE(sweep_torch("F.fold(a, (5, 6), (2, 3), padding=1, stride=(2, 1))",
                          {{{2, 12, 18}}, {{12, 18}}, {{0, 12, 18}}},
                          [](const V& x) {
                            return fold(x[0], {5, 6}, {2, 3}, {1, 1}, {1, 1}, {2, 1});
                          }));
  EXPECT_TRUE(sweep_torch("F.pixel_shuffle(a, 2)",
                          {{{2, 3, 8, 2, 3}}, {{8, 2, 3}}, {{0, 4, 2, 2}}, {{4, 4}}},
                          [](const V& x) { return pixel_shuffle(x[0], 2); }));
  EXPECT_TRUE(sweep_torch("F.pixel_unshuffle(a, 3)", {{{2, 2, 6, 3}}, {{1, 3, 3}}, {{0, 1, 3, 3}}},
                          [](const V& x) { return pixel_unshuffle(x[0], 3); }));
}

TEST(PadTorch, NegativePadsInEveryMode) {
  for (std::string mode : {"constant", "reflect", "replicate", "circular"}) {
    SCOPED_TRACE(mode);
    // Tessera also pads other ranks in these modes; PyTorch's ranks are compared here.
    EXPECT_TRUE(sweep_torch("F.pad(a, (-1, 2, 2, -1), mode='" + mode + "')", {{{2, 3, 5, 6}}},
                            [mode](const V& x) { return pad(x[0], {-1, 2, 2, -1}, mode); }));
    EXPECT_TRUE(sweep_torch("F.pad(a, (2, -3, -1, 1, 1, 0), mode='" + mode + "')",
                            {{{1, 2, 4, 5, 6}}},
                            [mode](const V& x) { return pad(x[0], {2, -3, -1, 1, 1, 0}, mode); }));
    EXPECT_TRUE(sweep_torch("F.pad(a, (-2, 1), mode='" + mode + "')", {{{2, 3, 4}}},
                            [mode](const V& x) { return pad(x[0], {-2, 1}, mode); }));
  }
}

}  // namespace
}  // namespace tessera::testing
