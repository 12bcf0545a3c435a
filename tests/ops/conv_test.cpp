#include "testing.h"

namespace tessera::testing {
namespace {

struct ConvCase {
  Shape x, w;
  std::vector<int64_t> stride, padding, dilation;
  int64_t groups;
  bool bias;
};

const ConvCase kCases[] = {
    {{2, 3, 6, 5}, {4, 3, 3, 3}, {1, 1}, {1, 1}, {1, 1}, 1, true},
    {{1, 2, 7, 7}, {3, 2, 3, 2}, {2, 1}, {0, 1}, {1, 1}, 1, false},
    {{2, 2, 8, 6}, {2, 2, 3, 3}, {1, 2}, {2, 0}, {2, 1}, 1, true},
    {{2, 4, 5, 5}, {6, 2, 3, 3}, {1, 1}, {1, 1}, {1, 1}, 2, true},
    {{1, 3, 5, 4}, {3, 1, 2, 2}, {2, 2}, {1, 1}, {1, 1}, 3, false},
    {{2, 3, 4, 4}, {5, 3, 1, 1}, {1, 1}, {0, 0}, {1, 1}, 1, true},
    {{1, 2, 4, 4}, {2, 2, 1, 1}, {2, 2}, {0, 0}, {1, 1}, 1, false},
    {{1, 1, 3, 3}, {1, 1, 3, 3}, {1, 1}, {0, 0}, {1, 1}, 1, true},
};

int64_t out_len(int64_t in, int64_t k, int64_t s, int64_t p, int64_t d) {
  return (in + 2 * p - d * (k - 1) - 1) / s + 1;
}

// The definition written out: calls visit(out_index, x_index, w_index) for
// every multiply-add of the convolution.
template <typename Visit>
void for_each_tap(const ConvCase& c, Shape& out_shape, Visit&& visit) {
  const int64_t n = c.x[0], ch = c.x[1], h = c.x[2], w = c.x[3];
  const int64_t o = c.w[0], cg = c.w[1], kh = c.w[2], kw = c.w[3];
  const int64_t oh = out_len(h, kh, c.stride[0], c.padding[0], c.dilation[0]);
  const int64_t ow = out_len(w, kw, c.stride[1], c.padding[1], c.dilation[1]);
  out_shape = {n, o, oh, ow};
  const int64_t og = o / c.groups;
  for (int64_t b = 0; b < n; ++b)
    for (int64_t oc = 0; oc < o; ++oc)
      for (int64_t y = 0; y < oh; ++y)
        for (int64_t x = 0; x < ow; ++x)
          for (int64_t ic = 0; ic < cg; ++ic)
            for (int64_t ky = 0; ky < kh; ++ky)
              for (int64_t kx = 0; kx < kw; ++kx) {
                int64_t iy = y * c.stride[0] - c.padding[0] + ky * c.dilation[0];
                int64_t ix = x * c.stride[1] - c.padding[1] + kx * c.dilation[1];
                if (iy < 0 || iy >= h || ix < 0 || ix >= w) continue;
                int64_t channel = (oc / og) * cg + ic;
                visit(((b * o + oc) * oh + y) * ow + x, ((b * ch + channel) * h + iy) * w + ix,
                      ((oc * cg + ic) * kh + ky) * kw + kx);
              }
}

std::vector<double> ref_forward(const ConvCase& c, const Tensor& x, const Tensor& w,
                                const Tensor& bias) {
  std::vector<double> vx = x.to_vector<double>(), vw = w.to_vector<double>();
  Shape out_shape;
  for_each_tap(c, out_shape, [](int64_t, int64_t, int64_t) {});
  std::vector<double> out(numel(out_shape), 0.0);
  if (bias.defined()) {
    std::vector<double> vb = bias.to_vector<double>();
    int64_t plane = out_shape[2] * out_shape[3];
    for (size_t i = 0; i < out.size(); ++i) out[i] = vb[(i / plane) % out_shape[1]];
  }
  for_each_tap(c, out_shape,
               [&](int64_t io, int64_t ix, int64_t iw) { out[io] += vx[ix] * vw[iw]; });
  return out;
}

Tensor conv(const ConvCase& c, const Tensor& x, const Tensor& w, const Tensor& bias) {
  return conv2d(x, w, bias, c.stride, c.padding, c.dilation, c.groups);
}

TEST(Conv2d, ForwardMatchesLoops) {
  for (const ConvCase& c : kCases) {
    SCOPED_TRACE(shape_str(c.x) + " * " + shape_str(c.w) + " groups " + std::to_string(c.groups));
    Tensor x = uniform(c.x, -1, 1, 1), w = uniform(c.w, -1, 1, 2);
    Tensor b = c.bias ? uniform({c.w[0]}, -1, 1, 3) : Tensor();
    std::vector<double> want = ref_forward(c, x, w, b);
    EXPECT_TRUE(all_close(conv(c, x, w, b), want, 1e-12, 1e-12));
    Tensor b32 = c.bias ? b.to(DType::f32) : Tensor();
    Tensor out32 = conv(c, x.to(DType::f32), w.to(DType::f32), b32);
    EXPECT_EQ(out32.dtype(), DType::f32);
    EXPECT_TRUE(all_close(out32, want, 1e-5, 1e-5));
  }
}

TEST(Conv2d, StridedInputsAndIntOverload) {
  ConvCase c = kCases[0];
  Tensor x = uniform({c.x[0], c.x[2], c.x[3], c.x[1]}, -1, 1, 4).permute({0, 3, 1, 2});
  Tensor w = uniform({c.w[0], c.w[2], c.w[3], c.w[1]}, -1, 1, 5).permute({0, 3, 1, 2});
  Tensor b = uniform({c.w[0]}, -1, 1, 6);
  EXPECT_FALSE(x.is_contiguous());
  std::vector<double> want = ref_forward(c, x, w, b);
  EXPECT_TRUE(all_close(conv2d(x, w, b, 1, 1), want, 1e-12, 1e-12));
  EXPECT_TRUE(all_close(conv2d(x.to(DType::f32), w.to(DType::f32), b.to(DType::f32), 1, 1), want,
                        1e-5, 1e-5));
}

TEST(Conv2d, BackwardOpsMatchLoops) {
  for (const ConvCase& c : kCases) {
    SCOPED_TRACE(shape_str(c.x) + " * " + shape_str(c.w) + " groups " + std::to_string(c.groups));
    Tensor x = uniform(c.x, -1, 1, 1), w = uniform(c.w, -1, 1, 2);
    Shape out_shape;
    for_each_tap(c, out_shape, [](int64_t, int64_t, int64_t) {});
    Tensor g = uniform(out_shape, -1, 1, 3);
    std::vector<double> vx = x.to_vector<double>(), vw = w.to_vector<double>();
    std::vector<double> vg = g.to_vector<double>();
    std::vector<double> dx(vx.size(), 0.0), dw(vw.size(), 0.0);
    for_each_tap(c, out_shape, [&](int64_t io, int64_t ix, int64_t iw) {
      dx[ix] += vg[io] * vw[iw];
      dw[iw] += vg[io] * vx[ix];
    });
    for (DType dtype : {DType::f64, DType::f32}) {
      double tol = dtype == DType::f64 ? 1e-12 : 1e-5;
      Tensor got_dx = conv2d_backward_input(g.to(dtype), w.to(dtype), {c.x[2], c.x[3]}, c.stride,
                                            c.padding, c.dilation, c.groups);
      EXPECT_EQ(got_dx.shape(), c.x);
      EXPECT_TRUE(all_close(got_dx, dx, tol, tol));
      Tensor got_dw = conv2d_backward_weight(x.to(dtype), g.to(dtype), {c.w[2], c.w[3]}, c.stride,
                                             c.padding, c.dilation, c.groups);
      EXPECT_EQ(got_dw.shape(), c.w);
      EXPECT_TRUE(all_close(got_dw, dw, tol, tol));
    }
  }
}

TEST(Conv2d, GradientsMatchFiniteDifferences) {
  for (const ConvCase& c : kCases) {
    SCOPED_TRACE(shape_str(c.x) + " * " + shape_str(c.w) + " groups " + std::to_string(c.groups));
    std::vector<Tensor> inputs = {uniform(c.x, -1, 1, 1).set_requires_grad(),
                                  uniform(c.w, -1, 1, 2).set_requires_grad()};
    if (c.bias) inputs.push_back(uniform({c.w[0]}, -1, 1, 3).set_requires_grad());
    auto fn = [c](const std::vector<Tensor>& in) {
      return conv(c, in[0], in[1], in.size() == 3 ? in[2] : Tensor());
    };
    EXPECT_TRUE(gradcheck(fn, inputs));
  }
}

TEST(Conv2d, SecondOrderAndBackwardOpGradients) {
  for (int index : {0, 2, 3}) {
    const ConvCase& c = kCases[index];
    SCOPED_TRACE(index);
    Tensor x = uniform(c.x, -1, 1, 1).set_requires_grad();
    Tensor w = uniform(c.w, -1, 1, 2).set_requires_grad();
    Tensor b = uniform({c.w[0]}, -1, 1, 3).set_requires_grad();
    // The gradient of conv2d is linear in x and w, but the product of the two
    // makes the Hessian non-zero; squaring makes every term count.
    auto fn = [c](const std::vector<Tensor>& in) {
      Tensor y = conv(c, in[0], in[1], in[2]);
      return mul(y, y);
    };
    EXPECT_TRUE(gradgradcheck(fn, {x, w, b}));
    Shape out_shape;
    for_each_tap(c, out_shape, [](int64_t, int64_t, int64_t) {});
    Tensor g = uniform(out_shape, -1, 1, 4).set_requires_grad();
    auto input_grad = [c](const std::vector<Tensor>& in) {
      return conv2d_backward_input(in[0], in[1], {c.x[2], c.x[3]}, c.stride, c.padding, c.dilation,
                                   c.groups);
    };
    auto weight_grad = [c](const std::vector<Tensor>& in) {
      return conv2d_backward_weight(in[0], in[1], {c.w[2], c.w[3]}, c.stride, c.padding,
                                    c.dilation, c.groups);
    };
    EXPECT_TRUE(gradcheck(input_grad, {g, w}));
    EXPECT_TRUE(gradcheck(weight_grad, {x, g}));
  }
}

TEST(Conv2d, EmptyBatchAndChannels) {
  Tensor out = conv2d(zeros({0, 3, 5, 5}), zeros({4, 3, 3, 3}), zeros({4}), 1, 1);
  EXPECT_EQ(out.shape(), (Shape{0, 4, 5, 5}));
  Tensor dw = conv2d_backward_weight(zeros({0, 3, 5, 5}), zeros({0, 4, 5, 5}), {3, 3}, {1, 1},
                                     {1, 1}, {1, 1}, 1);
  EXPECT_TRUE(all_close(dw, std::vector<double>(4 * 3 * 9, 0.0)));
  Tensor no_channels = conv2d(zeros({1, 0, 3, 3}), zeros({2, 0, 3, 3}), ones({2}), 1, 1);
  EXPECT_TRUE(all_close(no_channels, std::vector<double>(18, 1.0)));
}

TEST(Conv2d, IntegerInputsConvolveExactly) {
  // PyTorch convolves integer tensors (no gradient) and keeps their dtype.
  Tensor x = make({1, 2, 3, 4, 5, 6, 7, 8, 9}, {1, 1, 3, 3}, DType::i64);
  Tensor w = make({1, -1, 2, 0}, {1, 1, 2, 2}, DType::i64);
  Tensor y = conv2d(x, w, make({10}, {1}, DType::i64));
  EXPECT_EQ(y.dtype(), DType::i64);
  // Each window: a - b + 2c + 10 for [[a, b], [c, d]].
  EXPECT_EQ(y.to_vector<int64_t>(), (std::vector<int64_t>{17, 19, 23, 25}));
  Tensor t = conv_transpose2d(make({1, 2}, {1, 1, 1, 2}, DType::i64),
                              make({1, 10}, {1, 1, 1, 2}, DType::i64));
  EXPECT_EQ(t.to_vector<int64_t>(), (std::vector<int64_t>{1, 12, 20}));
}

TEST(Conv2d, ErrorsNameOpAndShapes) {
  auto expect_error = [](const std::function<void()>& fn, std::vector<std::string> parts) {
    SCOPED_TRACE(parts[0]);
    std::string message = error_of(fn);
    for (const std::string& part : parts) EXPECT_HAS(message, part);
  };
  expect_error([] { conv2d(zeros({1, 3, 5, 5}), zeros({4, 2, 3, 3})); },
               {"[conv2d]", "[1, 3, 5, 5]", "[4, 2, 3, 3]", "groups=1"});
  expect_error([] { conv2d(zeros({1, 3, 2, 2}), zeros({4, 3, 3, 3})); },
               {"[conv2d]", "does not fit", "[1, 3, 2, 2]"});
  expect_error([] { conv2d(zeros({5, 5}), zeros({4, 3, 3, 3})); },
               {"[conv2d]", "4-D", "[5, 5]"});
  expect_error([] { conv2d(zeros({1, 3, 5, 5}), zeros({4, 3, 3, 3}), zeros({3})); },
               {"[conv2d] bias", "[3]"});
  expect_error(
      [] { conv2d(zeros({1, 4, 5, 5}), zeros({3, 2, 3, 3}), {}, {1, 1}, {0, 0}, {1, 1}, 2); },
               {"[conv2d]", "not divisible by groups=2"});
  expect_error(
      [] { conv2d(zeros({1, 3, 5, 5}), zeros({4, 3, 3, 3}), {}, std::vector<int64_t>{1}); },
               {"[conv2d] stride needs 2 values"});
  expect_error([] { conv2d(zeros({1, 3, 5, 5}), zeros({4, 3, 3, 3}), {}, 0); },
               {"[conv2d] stride must be >= 1"});
  expect_error(
      [] { conv2d(zeros({1, 3, 5, 5}, DType::boolean), zeros({4, 3, 3, 3}, DType::boolean)); },
      {"[conv2d] does not take bool tensors"});
  expect_error(
      [] {
        conv2d_backward_input(zeros({1, 4, 4, 4}), zeros({4, 3, 3, 3}), {5, 5}, {1, 1}, {1, 1},
                              {1, 1}, 1);
      },
      {"[conv2d_backward_input]", "[1, 4, 4, 4]", "[1, 4, 5, 5]"});
  expect_error(
      [] {
        conv2d_backward_weight(zeros({2, 3, 5, 5}), zeros({1, 4, 5, 5}), {3, 3}, {1, 1}, {1, 1},
                               {1, 1}, 1);
      },
      {"[conv2d_backward_weight]", "[1, 4, 5, 5]"});
}

using Ints = std::vector<int64_t>;

Attrs conv_attrs(std::vector<int64_t> stride, std::vector<int64_t> padding,
                 std::vector<int64_t> dilation, int64_t groups) {
  return {{"stride", stride}, {"padding", padding}, {"dilation", dilation}, {"groups", groups}};
}

TESSERA_SBP_CASE("conv2d", [] {
  return std::vector<Tensor>{uniform({4, 5, 6, 6}, -1, 1, 1), uniform({5, 5, 3, 3}, -1, 1, 2),
                             uniform({5}, -1, 1, 3)};
}, conv_attrs({1, 1}, {1, 1}, {1, 1}, 1), 1e-9, 1e-9);
TESSERA_SBP_CASE("conv2d", [] {
  return std::vector<Tensor>{uniform({3, 4, 5, 7}, -1, 1, 1), uniform({5, 4, 2, 3}, -1, 1, 2)};
}, conv_attrs({2, 1}, {0, 1}, {1, 2}, 1), 1e-9, 1e-9);
TESSERA_SBP_CASE("conv2d", [] {
  return std::vector<Tensor>{uniform({3, 4, 5, 5}, -1, 1, 1), uniform({6, 2, 3, 3}, -1, 1, 2),
                             uniform({6}, -1, 1, 3)};
}, conv_attrs({1, 1}, {1, 1}, {1, 1}, 2), 1e-9, 1e-9);
TESSERA_SBP_CASE("conv2d_backward_input", [] {
  return std::vector<Tensor>{uniform({3, 5, 6, 6}, -1, 1, 1), uniform({5, 4, 3, 3}, -1, 1, 2)};
}, conv_attrs({1, 1}, {1, 1}, {1, 1}, 1).set("input_size", Ints{6, 6}), 1e-9, 1e-9);
TESSERA_SBP_CASE("conv2d_backward_input", [] {
  return std::vector<Tensor>{uniform({3, 4, 3, 3}, -1, 1, 1), uniform({4, 3, 3, 3}, -1, 1, 2)};
}, conv_attrs({2, 2}, {1, 1}, {1, 1}, 2).set("input_size", Ints{6, 6}), 1e-9, 1e-9);
TESSERA_SBP_CASE("conv2d_backward_weight", [] {
  return std::vector<Tensor>{uniform({4, 5, 6, 6}, -1, 1, 1), uniform({4, 3, 6, 6}, -1, 1, 2)};
}, conv_attrs({1, 1}, {1, 1}, {1, 1}, 1).set("kernel_size", Ints{3, 3}), 1e-9, 1e-9);
TESSERA_SBP_CASE("conv2d_backward_weight", [] {
  return std::vector<Tensor>{uniform({3, 4, 5, 5}, -1, 1, 1), uniform({3, 6, 3, 3}, -1, 1, 2)};
}, conv_attrs({2, 2}, {1, 1}, {1, 1}, 2).set("kernel_size", Ints{3, 3}), 1e-9, 1e-9);

TEST(Conv2dOverflow, HugePaddingIsAnErrorNamingTheOp) {
  Tensor x = uniform({1, 1, 3, 3});
  Tensor w = uniform({1, 1, 2, 2});
  std::string message = error_of([&] { conv2d(x, w, {}, 1, int64_t{1} << 62); });
  EXPECT_HAS(message, "[conv2d]");
  EXPECT_HAS(error_of([&] { conv2d(x, w, {}, 1, 0, int64_t{1} << 62); }), "[conv2d]");
}

}  // namespace
}  // namespace tessera::testing
