// unfold / fold against the window definition, their adjointness, and
// pixel (un)shuffle against index arithmetic.

#include "testing.h"

namespace tessera::testing {
namespace {

using Ints = std::vector<int64_t>;

struct WindowCase {
  Shape x;
  Ints kernel, dilation, padding, stride;
};

const WindowCase kCases[] = {
    {{2, 3, 5, 4}, {2, 2}, {1, 1}, {0, 0}, {1, 1}},
    {{1, 2, 6, 7}, {3, 2}, {2, 1}, {1, 2}, {1, 2}},
    {{2, 1, 4, 4}, {1, 1}, {1, 1}, {0, 0}, {2, 2}},
    {{1, 2, 3, 3}, {3, 3}, {1, 1}, {1, 1}, {1, 1}},
};

int64_t blocks(int64_t in, int64_t k, int64_t d, int64_t p, int64_t s) {
  return (in + 2 * p - d * (k - 1) - 1) / s + 1;
}

// out[n, (c, ky, kx), (by, bx)] = x[n, c, by * s - p + ky * d, ...], zero outside.
std::vector<double> naive_unfold(const WindowCase& c, const std::vector<double>& x, Shape& shape) {
  const int64_t n = c.x[0], ch = c.x[1], h = c.x[2], w = c.x[3];
  const int64_t kh = c.kernel[0], kw = c.kernel[1];
  const int64_t bh = blocks(h, kh, c.dilation[0], c.padding[0], c.stride[0]);
  const int64_t bw = blocks(w, kw, c.dilation[1], c.padding[1], c.stride[1]);
  shape = {n, ch * kh * kw, bh * bw};
  std::vector<double> out;
  for (int64_t b = 0; b < n; ++b)
    for (int64_t k = 0; k < ch; ++k)
      for (int64_t ky = 0; ky < kh; ++ky)
        for (int64_t kx = 0; kx < kw; ++kx)
          for (int64_t by = 0; by < bh; ++by)
            for (int64_t bx = 0; bx < bw; ++bx) {
              const int64_t iy = by * c.stride[0] - c.padding[0] + ky * c.dilation[0];
              const int64_t ix = bx * c.stride[1] - c.padding[1] + kx * c.dilation[1];
              const bool inside = iy >= 0 && iy < h && ix >= 0 && ix < w;
              out.push_back(inside ? x[((b * ch + k) * h + iy) * w + ix] : 0.0);
            }
  return out;
}

TEST(Unfold, MatchesWindowsAndFoldIsItsAdjoint) {
  for (const WindowCase& c : kCases) {
    SCOPED_TRACE(shape_str(c.x) + " kernel " + shape_str(c.kernel));
    Tensor x = uniform(c.x, -1, 1, 1);
    Shape shape;
    std::vector<double> want = naive_unfold(c, x.to_vector<double>(), shape);
    Tensor cols = unfold(x, c.kernel, c.dilation, c.padding, c.stride);
    EXPECT_EQ(cols.shape(), shape);
    EXPECT_TRUE(all_close(cols, want, 1e-12, 1e-12));
    EXPECT_TRUE(all_close(unfold(x.to(DType::f32), c.kernel, c.dilation, c.padding, c.stride),
                          want, 1e-6, 1e-6));
    // Unbatched.
    EXPECT_TRUE(all_close(unfold(x.select(0, 0), c.kernel, c.dilation, c.padding, c.stride),
                          cols.select(0, 0), 1e-12, 1e-12));
    // <unfold(x), y> == <x, fold(y)>.
    Tensor y = uniform(shape, -1, 1, 2);
    Tensor folded = fold(y, {c.x[2], c.x[3]}, c.kernel, c.dilation, c.padding, c.stride);
    EXPECT_EQ(folded.shape(), c.x);
    const double lhs = sum(mul(cols, y)).item<double>();
    const double rhs = sum(mul(x, folded)).item<double>();
    EXPECT_NEAR(lhs, rhs, 1e-10);
    EXPECT_TRUE(all_close(fold(y.select(0, 0), {c.x[2], c.x[3]}, c.kernel, c.dilation, c.padding,
                               c.stride),
                          folded.select(0, 0), 1e-12, 1e-12));
  }
}

TEST(Unfold, HandValues) {
  // 3x3 image, 2x2 windows: four windows, rows are the four taps.
  Tensor x = make({1, 2, 3, 4, 5, 6, 7, 8, 9}, {1, 1, 3, 3});
  EXPECT_TRUE(all_close(unfold(x, {2, 2}),
                        {1, 2, 4, 5, 2, 3, 5, 6, 4, 5, 7, 8, 5, 6, 8, 9}));
  // fold of ones counts how many windows cover each pixel.
  EXPECT_TRUE(all_close(fold(ones({1, 4, 4}, DType::f64), {3, 3}, {2, 2}),
                        {1, 2, 1, 2, 4, 2, 1, 2, 1}));
}

TEST(Unfold, GradientsMatchFiniteDifferences) {
  for (const WindowCase& c : kCases) {
    SCOPED_TRACE(shape_str(c.x) + " kernel " + shape_str(c.kernel));
    Tensor x = uniform(c.x, -1, 1, 3).set_requires_grad();
    auto unfold_fn = [c](const std::vector<Tensor>& in) {
      return unfold(in[0], c.kernel, c.dilation, c.padding, c.stride);
    };
    EXPECT_TRUE(gradcheck(unfold_fn, {x}));
    EXPECT_TRUE(gradgradcheck(unfold_fn, {x}));
    Shape shape;
    naive_unfold(c, x.detach().to_vector<double>(), shape);
    Tensor y = uniform(shape, -1, 1, 4).set_requires_grad();
    EXPECT_TRUE(gradcheck(
        [c](const std::vector<Tensor>& in) {
          return fold(in[0], {c.x[2], c.x[3]}, c.kernel, c.dilation, c.padding, c.stride);
        },
        {y}));
  }
}

TEST(Unfold, ErrorsNameTheOp) {
  EXPECT_HAS(error_of([] { unfold(zeros({1, 2, 2, 2}), {3, 3}); }), "[unfold]");
  EXPECT_HAS(error_of([] { unfold(zeros({1, 0, 4, 4}), {2, 2}); }), "[unfold]");
  EXPECT_HAS(error_of([] { unfold(zeros({4, 4}), {2, 2}); }), "[unfold] expects");
  EXPECT_HAS(error_of([] { fold(zeros({1, 5, 4}), {3, 3}, {2, 2}); }), "[fold]");
  EXPECT_HAS(error_of([] { fold(zeros({1, 4, 5}), {3, 3}, {2, 2}); }), "[fold]");
  EXPECT_EQ(unfold(zeros({0, 2, 4, 4}), {2, 2}).shape(), (Shape{0, 8, 9}));
}

TEST(PixelShuffle, MovesChannelsIntoSpace) {
  Tensor x = uniform({2, 3, 8, 2, 3}, -1, 1, 1);  // two batch dims, C = 2 * 2 * 2
  Tensor y = pixel_shuffle(x, 2);
  ASSERT_EQ(y.shape(), (Shape{2, 3, 2, 4, 6}));
  std::vector<double> vx = x.to_vector<double>(), vy = y.to_vector<double>();
  const int64_t r = 2, c = 2, h = 2, w = 3;
  for (int64_t b = 0; b < 6; ++b)
    for (int64_t k = 0; k < c; ++k)
      for (int64_t oy = 0; oy < h * r; ++oy)
        for (int64_t ox = 0; ox < w * r; ++ox) {
          const int64_t in_channel = k * r * r + (oy % r) * r + ox % r;
          const double want = vx[((b * c * r * r + in_channel) * h + oy / r) * w + ox / r];
          ASSERT_EQ(vy[((b * c + k) * h * r + oy) * w * r + ox], want);
        }
  EXPECT_TRUE(all_close(pixel_unshuffle(y, 2), x, 0, 0));
  EXPECT_TRUE(all_close(pixel_shuffle(make({0, 1, 2, 3}, {4, 1, 1}), 2), {0, 1, 2, 3}));
  EXPECT_EQ(pixel_shuffle(zeros({0, 4, 4, 5}), 2).shape(), (Shape{0, 1, 8, 10}));
  EXPECT_TRUE(gradcheck([](const std::vector<Tensor>& in) { return pixel_shuffle(in[0], 2); },
                        {uniform({1, 4, 2, 3}, -1, 1, 2).set_requires_grad()}));
  EXPECT_TRUE(gradcheck([](const std::vector<Tensor>& in) { return pixel_unshuffle(in[0], 2); },
                        {uniform({4, 2, 4}, -1, 1, 3).set_requires_grad()}));
  EXPECT_HAS(error_of([] { pixel_shuffle(zeros({7, 4, 5}), 2); }), "[pixel_shuffle]");
  EXPECT_HAS(error_of([] { pixel_shuffle(zeros({8, 4}), 2); }), "[pixel_shuffle]");
  EXPECT_HAS(error_of([] { pixel_unshuffle(zeros({2, 3, 5, 6}), 2); }), "[pixel_unshuffle]");
}

Attrs window_attrs(Ints kernel, Ints dilation, Ints padding, Ints stride) {
  return {{"kernel_size", kernel}, {"dilation", dilation}, {"padding", padding},
          {"stride", stride}};
}

TESSERA_SBP_CASE("unfold", [] { return std::vector<Tensor>{uniform({4, 3, 6, 5}, -1, 1, 1)}; },
                 window_attrs({3, 2}, {1, 2}, {1, 0}, {2, 1}));
TESSERA_SBP_CASE("fold", [] { return std::vector<Tensor>{uniform({4, 12, 12}, -1, 1, 1)}; },
                 window_attrs({2, 2}, {1, 1}, {0, 0}, {1, 1}).set("output_size", Ints{4, 5}));

}  // namespace
}  // namespace tessera::testing
