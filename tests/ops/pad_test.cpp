#include <algorithm>

#include "testing.h"

namespace tessera::testing {
namespace {

// Naive padding: for every output coordinate, find the input coordinate per
// dim by the mode's rule (or fill). pads are PyTorch-ordered.
std::vector<double> ref_pad(const Tensor& x, const std::vector<int64_t>& pads,
                            const std::string& mode, double value) {
  const Shape& in = x.shape();
  const int64_t ndim = x.dim();
  std::vector<int64_t> before(ndim, 0), after(ndim, 0);
  for (size_t k = 0; k < pads.size() / 2; ++k) {
    before[ndim - 1 - k] = pads[2 * k];
    after[ndim - 1 - k] = pads[2 * k + 1];
  }
  Shape out(ndim);
  for (int64_t d = 0; d < ndim; ++d) out[d] = in[d] + before[d] + after[d];
  std::vector<double> xv = x.to_vector<double>(), result;
  for (int64_t p = 0; p < numel(out); ++p) {
    int64_t rest = p, source = 0, scale = 1;
    bool outside = false;
    std::vector<int64_t> c(ndim);
    for (int64_t d = ndim - 1; d >= 0; --d) {
      c[d] = rest % out[d];
      rest /= out[d];
    }
    for (int64_t d = ndim - 1; d >= 0; --d) {
      int64_t i = c[d] - before[d], n = in[d];
      if (mode == "reflect") {
        i = i < 0 ? -i : (i >= n ? 2 * n - 2 - i : i);
      } else if (mode == "replicate") {
        i = std::min(std::max<int64_t>(i, 0), n - 1);
      } else if (mode == "circular") {
        i = (i + n) % n;
      } else if (i < 0 || i >= n) {
        outside = true;
      }
      source += i * scale;
      scale *= n;
    }
    result.push_back(outside ? value : xv[source]);
  }
  return result;
}

TEST(Pad, ConstantMatchesTorchValues) {
  Tensor x = make({0, 1, 2, 3, 4, 5}, {2, 3});
  Tensor out = pad(x, {-1, 2}, "constant", 7.0);
  EXPECT_EQ(out.shape(), (Shape{2, 4}));
  EXPECT_TRUE(all_close(out, {1, 2, 7, 7, 4, 5, 7, 7}));
  EXPECT_EQ(pad(x, {-2, -1}).shape(), (Shape{2, 0}));
  Tensor both = pad(x, {1, 0, 0, 1});
  EXPECT_TRUE(all_close(both, {0, 0, 1, 2, 0, 3, 4, 5, 0, 0, 0, 0}));
}

TEST(Pad, OtherModesMatchTorchValues) {
  Tensor x = make({0, 1, 2, 3, 4, 5}, {1, 2, 3});
  EXPECT_TRUE(all_close(pad(x, {2, 2}, "reflect"), {2, 1, 0, 1, 2, 1, 0, 5, 4, 3, 4, 5, 4, 3}));
  EXPECT_TRUE(all_close(pad(x.reshape({1, 1, 2, 3}), {1, 1, 1, 1}, "replicate"),
                        {0, 0, 1, 2, 2, 0, 0, 1, 2, 2, 3, 3, 4, 5, 5, 3, 3, 4, 5, 5}));
  EXPECT_TRUE(all_close(pad(x, {3, 1}, "circular"), {0, 1, 2, 0, 1, 2, 0, 3, 4, 5, 3, 4, 5, 3}));
}

TEST(Pad, AllModesAgainstLoops) {
  Tensor x = uniform({3, 4, 5}, -1, 1, 1);
  Tensor strided = uniform({5, 4, 3}, -1, 1, 1).permute({2, 1, 0});
  const std::vector<std::vector<int64_t>> constant_pads = {
      {1, 2}, {0, 0, 2, 1}, {-1, 2, 1, -2}, {2, 0, 0, 3, 1, 1}, {-2, -3, 0, 0, -1, 0}};
  for (const auto& pads : constant_pads) {
    SCOPED_TRACE(shape_str(pads));
    EXPECT_TRUE(all_close(pad(x, pads, "constant", 0.5), ref_pad(x, pads, "constant", 0.5), 0, 0));
    EXPECT_TRUE(all_close(pad(strided, pads), ref_pad(strided, pads, "constant", 0), 0, 0));
  }
  const std::vector<std::vector<int64_t>> mode_pads = {{1, 3}, {4, 0, 2, 1}, {1, 1, 3, 0, 2, 1}};
  for (const char* mode : {"reflect", "replicate", "circular"}) {
    for (const auto& pads : mode_pads) {
      SCOPED_TRACE(std::string(mode) + " " + shape_str(pads));
      EXPECT_TRUE(all_close(pad(x, pads, mode), ref_pad(x, pads, mode, 0), 0, 0));
      EXPECT_TRUE(all_close(pad(strided, pads, mode), ref_pad(strided, pads, mode, 0), 0, 0));
    }
  }
  // Other dtypes: f32, i64 with an integer fill, bool.
  Tensor x32 = x.to(DType::f32);
  EXPECT_TRUE(all_close(pad(x32, {1, 1}, "reflect"), ref_pad(x32, {1, 1}, "reflect", 0), 0, 0));
  Tensor xi = Tensor::from_vector<int64_t>({1, 2, 3}, {3});
  EXPECT_TRUE(all_close(pad(xi, {1, 2}, "constant", -4), {-4, 1, 2, 3, -4, -4}));
  EXPECT_EQ(pad(xi, {1, 2}).dtype(), DType::i64);
  EXPECT_TRUE(all_close(pad(gt(make({1, -1}), 0), {0, 1}, "constant", 1), {1, 0, 1}));
}

TEST(Pad, Gradients) {
  auto check = [](const std::vector<int64_t>& pads, const char* mode) {
    SCOPED_TRACE(std::string(mode) + " " + shape_str(pads));
    auto fn = [pads, mode](const std::vector<Tensor>& in) { return pad(in[0], pads, mode); };
    EXPECT_TRUE(gradcheck(fn, {uniform({2, 3, 4}, -1, 1, 2).set_requires_grad()}));
    auto squared = [pads, mode](const std::vector<Tensor>& in) {
      Tensor y = pad(in[0], pads, mode);
      return mul(y, y);
    };
    EXPECT_TRUE(gradgradcheck(squared, {uniform({2, 3, 4}, -1, 1, 3).set_requires_grad()}));
  };
  check({1, 2}, "constant");
  check({-1, 2, 1, -2}, "constant");
  check({0, 0, 0, 0, 1, -1}, "constant");
  check({3, 1, 2, 1}, "reflect");
  check({2, 3, 1, 0}, "replicate");
  check({4, 1, 0, 3}, "circular");
  check({0, 0, 1, 1, 1, 0}, "reflect");
  // The gradient of a reflect pad sums the reflected copies.
  Tensor x = make({1, 2, 3}, {1, 3}).set_requires_grad();
  sum(pad(x, {2, 2}, "reflect")).backward();
  EXPECT_TRUE(all_close(x.grad(), {2, 3, 2}));
  Tensor y = make({1, 2, 3}, {1, 3}).set_requires_grad();
  sum(pad(y, {2, 1}, "replicate")).backward();
  EXPECT_TRUE(all_close(y.grad(), {3, 1, 2}));
}

TEST(Pad, ErrorsExplainValidPads) {
  Tensor x = zeros({2, 3});
  EXPECT_HAS(error_of([&] { pad(x, {1, 2, 3}); }), "[pad] pads [1, 2, 3] has 3 entries");
  EXPECT_HAS(error_of([&] { pad(x, {1, 1, 1, 1, 1, 1}); }), "at most 2 * 2 entries");
  EXPECT_HAS(error_of([&] { pad(x, {3, 0}, "reflect"); }), "must each be less than the size");
  EXPECT_HAS(error_of([&] { pad(x, {-2, -1}, "replicate"); }), "needs at least one");
  EXPECT_HAS(error_of([&] { pad(x, {-3, 1}, "circular"); }), "crop every element");
  EXPECT_HAS(error_of([&] { pad(x, {1, 0}, "reflect", 2.0); }), "takes no value");
  EXPECT_HAS(error_of([&] { pad(x, {-2, -2}); }), "crop 4 elements");
  EXPECT_HAS(error_of([&] { pad(x, {1, 1}, "wrap"); }), "unknown mode");
  EXPECT_HAS(error_of([&] { pad(x, {4, 0}, "circular"); }), "at most the size");
}

// PyTorch 1.13's values: reflect and replicate pad the whole input and then
// crop; circular crops first and wraps what is left.
TEST(Pad, NegativePadsCropInEveryMode) {
  Tensor x = make({0, 1, 2, 3, 4}, {1, 1, 5});
  struct Case {
    const char* mode;
    std::vector<int64_t> pads;
    std::vector<double> want;
  };
  const Case cases[] = {
      {"reflect", {-1, 2}, {1, 2, 3, 4, 3, 2}},   {"reflect", {2, -1}, {2, 1, 0, 1, 2, 3}},
      {"reflect", {-2, -2}, {2}},                 {"reflect", {-3, 2}, {3, 4, 3, 2}},
      {"replicate", {-1, 2}, {1, 2, 3, 4, 4, 4}}, {"replicate", {2, -1}, {0, 0, 0, 1, 2, 3}},
      {"replicate", {-1, -1}, {1, 2, 3}},         {"circular", {-1, 2}, {1, 2, 3, 4, 1, 2}},
      {"circular", {2, -1}, {2, 3, 0, 1, 2, 3}},  {"circular", {-2, -2}, {2}},
      {"circular", {-3, 2}, {3, 4, 3, 4}},        {"constant", {-1, 2}, {1, 2, 3, 4, 0, 0}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(std::string(c.mode) + " " + shape_str(c.pads));
    Tensor y = pad(x, c.pads, c.mode);
    EXPECT_EQ(y.shape(), (Shape{1, 1, static_cast<int64_t>(c.want.size())}));
    EXPECT_TRUE(all_close(y, c.want, 0, 0));
  }
  EXPECT_EQ(pad(x, {-3, -2}, "circular").shape(), (Shape{1, 1, 0}));
  // Two dims, mixed signs, with gradients.
  Tensor image = uniform({2, 3, 5, 6}, -1, 1, 1);
  for (const char* mode : {"constant", "reflect", "replicate", "circular"}) {
    SCOPED_TRACE(mode);
    const std::vector<int64_t> pads = {-2, 3, 2, -1};
    Tensor y = pad(image, pads, mode);
    EXPECT_EQ(y.shape(), (Shape{2, 3, 6, 7}));
    EXPECT_TRUE(gradcheck(
        [&](const std::vector<Tensor>& in) { return pad(in[0], pads, mode); },
        {image.detach().set_requires_grad()}));
    EXPECT_TRUE(gradgradcheck(
        [&](const std::vector<Tensor>& in) { return pad(in[0], pads, mode); },
        {image.detach().set_requires_grad()}));
  }
}

TEST(Pad, EmptyAndZeroPads) {
  Tensor x = uniform({2, 3});
  EXPECT_TRUE(all_close(pad(x, {}), x, 0, 0));
  EXPECT_TRUE(all_close(pad(x, {0, 0}, "reflect"), x, 0, 0));
  EXPECT_TRUE(all_close(pad(zeros({0, 3}), {1, 1}, "constant", 2.0), std::vector<double>{}));
  EXPECT_EQ(pad(zeros({0, 3}), {1, 1}).shape(), (Shape{0, 5}));
  EXPECT_TRUE(all_close(pad(zeros({2, 0}), {1, 1}, "constant", 2.0), {2, 2, 2, 2}));
  EXPECT_TRUE(all_close(pad(Tensor::scalar(3.0), {}), {3}));
  Tensor y = uniform({2, 3}).set_requires_grad();
  sum(pad(y, {0, 0, 1, 0}, "replicate")).backward();
  EXPECT_TRUE(all_close(y.grad(), {2, 2, 2, 1, 1, 1}));
}

// ---- SBP ---------------------------------------------------------------------

Attrs pad_attrs(std::vector<int64_t> before, std::vector<int64_t> after, const char* mode,
                double value = 0.0) {
  return Attrs{{"before", std::move(before)},
               {"after", std::move(after)},
               {"mode", std::string(mode)},
               {"value", value}};
}

TESSERA_SBP_CASE(
    "pad",
    [] {
      return std::vector<Tensor>{uniform({5, 4, 3}, -1, 1, 1)};
    },
    pad_attrs({0, 1, -1}, {0, 2, 0}, "constant"));
TESSERA_SBP_CASE(
    "pad",
    [] {
      return std::vector<Tensor>{uniform({5, 4}, -1, 1, 2)};
    },
    pad_attrs({0, 2}, {0, 1}, "constant", 1.5));
TESSERA_SBP_CASE(
    "pad",
    [] {
      return std::vector<Tensor>{uniform({5, 4}, -1, 1, 3)};
    },
    pad_attrs({0, 3}, {0, 2}, "reflect"));
TESSERA_SBP_CASE(
    "pad",
    [] {
      return std::vector<Tensor>{uniform({3, 5, 4}, -1, 1, 4)};
    },
    pad_attrs({0, 1, 2}, {0, 0, 3}, "replicate"));
TESSERA_SBP_CASE(
    "pad_backward",
    [] {
      return std::vector<Tensor>{uniform({5, 9}, -1, 1, 5)};
    },
    Attrs{{"before", std::vector<int64_t>{0, 3}},
          {"after", std::vector<int64_t>{0, 2}},
          {"mode", std::string("reflect")}});
TESSERA_SBP_CASE(
    "pad_backward",
    [] {
      return std::vector<Tensor>{uniform({6, 5, 7}, -1, 1, 6)};
    },
    Attrs{{"before", std::vector<int64_t>{1, 0, 2}},
          {"after", std::vector<int64_t>{2, 0, 1}},
          {"mode", std::string("circular")}});

TEST(PadOverflow, HugePadsAreAnErrorNamingTheOp) {
  Tensor x = uniform({2, 3});
  const int64_t huge = int64_t{1} << 62;
  EXPECT_HAS(error_of([&] { pad(x, {huge, huge}); }), "[pad]");
  EXPECT_HAS(error_of([&] { pad(x, {huge, 1, huge, 1}); }), "[pad]");
  EXPECT_HAS(error_of([&] { pad(x, {std::numeric_limits<int64_t>::min(), 0}); }), "[pad]");
}

}  // namespace
}  // namespace tessera::testing
