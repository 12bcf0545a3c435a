// interpolate against PyTorch (values and gradients) for every mode, with
// sizes and scale factors, and against hand values.

#include <string>

#include "testing.h"
#include "torch_check.h"

namespace tessera::testing {
namespace {

using V = std::vector<Tensor>;

TEST(Interpolate, HandValues) {
  Tensor x = make({0.0, 1.0, 2.0, 3.0}, {1, 1, 4});
  EXPECT_TRUE(all_close(interpolate(x, {2}, {}, "nearest"), {0.0, 2.0}, 1e-12, 0));
  EXPECT_TRUE(all_close(interpolate(x, {2}, {}, "area"), {0.5, 2.5}, 1e-12, 0));
  EXPECT_TRUE(all_close(interpolate(x, {7}, {}, "linear", true),
                        {0.0, 0.5, 1.0, 1.5, 2.0, 2.5, 3.0}, 1e-12, 0));
  EXPECT_TRUE(all_close(interpolate(make({0.0, 2.0}, {1, 1, 2}), {}, {2.0}, "linear"),
                        {0.0, 0.5, 1.5, 2.0}, 1e-12, 0));
}

TEST(InterpolateTorch, EveryModeWithSizesAndScales) {
  struct Case {
    std::string mode;
    Shape shape;
    std::string size;
    std::vector<int64_t> sizes;
  };
  const std::vector<Case> cases{
      {"nearest", {2, 3, 5}, "7", {7}},
      {"nearest", {2, 2, 5, 4}, "(3, 9)", {3, 9}},
      {"nearest", {1, 2, 3, 4, 2}, "(5, 2, 3)", {5, 2, 3}},
      {"nearest-exact", {2, 2, 5, 4}, "(3, 9)", {3, 9}},
      {"nearest-exact", {1, 2, 7}, "3", {3}},
      {"area", {2, 2, 5, 7}, "(3, 4)", {3, 4}},
      {"area", {1, 2, 3, 4, 5}, "(2, 4, 3)", {2, 4, 3}},
      {"area", {2, 3, 8}, "3", {3}},
      {"linear", {2, 3, 5}, "8", {8}},
      {"linear", {2, 3, 8}, "3", {3}},
      {"bilinear", {2, 2, 5, 4}, "(3, 9)", {3, 9}},
      {"bicubic", {2, 2, 5, 4}, "(3, 9)", {3, 9}},
      {"bicubic", {1, 1, 4, 4}, "(8, 1)", {8, 1}},
      {"trilinear", {1, 2, 3, 4, 2}, "(5, 2, 3)", {5, 2, 3}},
      {"bilinear", {0, 2, 3, 3}, "(4, 5)", {4, 5}},
  };
  for (const Case& c : cases) {
    const bool interpolating = c.mode != "nearest" && c.mode != "nearest-exact" && c.mode != "area";
    for (int corners = 0; corners < (interpolating ? 2 : 1); ++corners) {
      const std::string ac =
          interpolating ? (corners ? ", align_corners=True" : ", align_corners=False") : "";
      std::optional<bool> align;
      if (interpolating) align = corners == 1;
      EXPECT_TRUE(sweep_torch(
          "F.interpolate(a, size=" + c.size + ", mode='" + c.mode + "'" + ac + ")", {{c.shape}},
          [&c, align](const V& x) { return interpolate(x[0], c.sizes, {}, c.mode, align); }))
          << c.mode << " " << shape_str(c.shape);
    }
  }
}

TEST(InterpolateTorch, ScaleFactors) {
  const std::vector<std::string> modes{"nearest", "nearest-exact", "bilinear", "bicubic", "area"};
  for (const std::string& mode : modes) {
    const bool interpolating = mode == "bilinear" || mode == "bicubic";
    for (const double scale : {2.0, 0.5, 1.7}) {
      for (const int recompute : {0, 1}) {
        std::optional<bool> align;
        if (interpolating) align = false;
        EXPECT_TRUE(
            sweep_torch("F.interpolate(a, scale_factor=" + std::to_string(scale) + ", mode='" +
                            mode + "'" + (interpolating ? ", align_corners=False" : "") +
                            ", recompute_scale_factor=" + (recompute ? "True" : "False") + ")",
                        {{{2, 2, 5, 6}}},
                        [&](const V& x) {
                          return interpolate(x[0], {}, {scale}, mode, align, recompute == 1);
                        }))
            << mode << " " << scale;
      }
    }
  }
  EXPECT_TRUE(sweep_torch("F.interpolate(a, scale_factor=(1.5, 0.75), mode='bilinear')",
                          {{{1, 2, 4, 8}}}, [](const V& x) {
                            return interpolate(x[0], {}, {1.5, 0.75}, "bilinear");
                          }));
  EXPECT_TRUE(
      sweep_torch("F.interpolate(a, scale_factor=2.5, mode='trilinear', align_corners=True)",
                  {{{1, 2, 2, 3, 2}}},
                  [](const V& x) { return interpolate(x[0], {}, {2.5}, "trilinear", true); }));
}

TEST(InterpolateTorch, BadArguments) {
  const V x{uniform({1, 2, 4, 4})};
  EXPECT_TRUE(matches_torch("F.interpolate(a, size=3, mode='linear')", x,
                            [](const V& v) { return interpolate(v[0], {3}, {}, "linear"); }));
  EXPECT_TRUE(
      matches_torch("F.interpolate(a, size=3, mode='nearest', align_corners=True)", x,
                    [](const V& v) { return interpolate(v[0], {3}, {}, "nearest", true); }));
  EXPECT_TRUE(matches_torch("F.interpolate(a, size=(3, 3, 3))", x, [](const V& v) {
    return interpolate(v[0], {3, 3, 3});
  }));
  EXPECT_TRUE(matches_torch("F.interpolate(a, scale_factor=0.1)", x,
                            [](const V& v) { return interpolate(v[0], {}, {0.1}); }));
  EXPECT_THROW(interpolate(x[0]), Error);
  EXPECT_THROW(interpolate(x[0], {2}, {2.0}), Error);
  EXPECT_THROW(interpolate(x[0], {2}, {}, "cubic"), Error);
}

}  // namespace
}  // namespace tessera::testing
