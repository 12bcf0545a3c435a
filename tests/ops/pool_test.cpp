#include <cmath>
#include <limits>

#include "testing.h"

namespace tessera::testing {
namespace {

using Ints = std::vector<int64_t>;

struct PoolCase {
  Shape x;
  Ints kernel, stride, padding, dilation;
  bool ceil = false;
};

const PoolCase kCases[] = {
    {{2, 3, 7, 6}, {3, 2}, {2, 1}, {1, 1}, {1, 1}},
    {{1, 2, 8, 8}, {2, 2}, {2, 2}, {0, 0}, {2, 2}},
    {{3, 5, 5}, {3, 3}, {1, 1}, {1, 1}, {1, 1}},
    {{2, 2, 6, 7}, {3, 3}, {2, 2}, {1, 0}, {1, 1}},
    {{1, 1, 4, 4}, {1, 1}, {1, 1}, {0, 0}, {1, 1}},
    // The tiled 2x2 / stride 2 fast path, odd sizes leaving an edge uncovered.
    {{2, 3, 7, 9}, {2, 2}, {2, 2}, {0, 0}, {1, 1}},
    {{1, 2, 8, 6}, {2, 2}, {2, 2}, {0, 0}, {1, 1}},
};

// Visits every (plane, oy, ox) window as the list of flat indices of its
// in-bounds input elements plus the window's count with padding included.
template <typename Visit>
Shape for_each_window(const PoolCase& c, Visit&& visit) {
  const size_t nd = c.x.size();
  int64_t planes = 1;
  for (size_t d = 0; d + 2 < nd; ++d) planes *= c.x[d];
  const int64_t h = c.x[nd - 2], w = c.x[nd - 1];
  // PyTorch's rule: with ceil_mode the last window must start inside the
  // input or its left padding.
  auto len = [&](int64_t in, int d) {
    const int64_t span = in + 2 * c.padding[d] - c.dilation[d] * (c.kernel[d] - 1) - 1;
    int64_t out = (c.ceil ? (span + c.stride[d] - 1) : span) / c.stride[d] + 1;
    if (c.ceil && (out - 1) * c.stride[d] >= in + c.padding[d]) --out;
    return out;
  };
  const int64_t oh = len(h, 0), ow = len(w, 1);
  for (int64_t p = 0; p < planes; ++p) {
    for (int64_t oy = 0; oy < oh; ++oy) {
      for (int64_t ox = 0; ox < ow; ++ox) {
        std::vector<int64_t> members;
        int64_t padded = 0;
        for (int64_t ky = 0; ky < c.kernel[0]; ++ky) {
          for (int64_t kx = 0; kx < c.kernel[1]; ++kx) {
            int64_t iy = oy * c.stride[0] - c.padding[0] + ky * c.dilation[0];
            int64_t ix = ox * c.stride[1] - c.padding[1] + kx * c.dilation[1];
            if (iy < h + c.padding[0] && ix < w + c.padding[1]) ++padded;
            if (iy >= 0 && iy < h && ix >= 0 && ix < w) members.push_back((p * h + iy) * w + ix);
          }
        }
        visit((p * oh + oy) * ow + ox, members, padded);
      }
    }
  }
  Shape out(c.x.begin(), c.x.end() - 2);
  out.push_back(oh);
  out.push_back(ow);
  return out;
}

struct Reference {
  std::vector<double> max, avg, avg_exclude, max_grad, avg_grad, avg_exclude_grad;
};

// Forward values and the gradients for an upstream gradient `g` (flat).
Reference reference(const PoolCase& c, const std::vector<double>& x, const std::vector<double>& g) {
  Reference r;
  r.max_grad.assign(x.size(), 0.0);
  r.avg_grad.assign(x.size(), 0.0);
  r.avg_exclude_grad.assign(x.size(), 0.0);
  for_each_window(c, [&](int64_t out, const std::vector<int64_t>& members, int64_t padded) {
    int64_t best = members[0];
    double total = 0;
    for (int64_t m : members) {
      if (x[m] > x[best]) best = m;
      total += x[m];
    }
    r.max.push_back(x[best]);
    r.avg.push_back(total / padded);
    r.avg_exclude.push_back(total / members.size());
    double go = g.empty() ? 0.0 : g[out];
    r.max_grad[best] += go;
    for (int64_t m : members) {
      r.avg_grad[m] += go / padded;
      r.avg_exclude_grad[m] += go / members.size();
    }
  });
  return r;
}

Shape pooled(const PoolCase& c) {
  return for_each_window(c, [](int64_t, const std::vector<int64_t>&, int64_t) {});
}

Ints hw(const Shape& shape) { return {shape[shape.size() - 2], shape.back()}; }

TEST(Pool, ForwardMatchesLoops) {
  for (const PoolCase& c : kCases) {
    SCOPED_TRACE(shape_str(c.x) + " kernel " + shape_str(c.kernel));
    Tensor x = uniform(c.x, -1, 1, 1);
    Reference r = reference(c, x.to_vector<double>(), {});
    for (DType dtype : {DType::f64, DType::f32}) {
      Tensor xt = x.to(dtype);
      Tensor max_out = max_pool2d(xt, c.kernel, c.stride, c.padding, c.dilation);
      EXPECT_EQ(max_out.shape(), pooled(c));
      EXPECT_EQ(max_out.dtype(), dtype);
      EXPECT_TRUE(all_close(max_out, r.max, 1e-6, 1e-7));
      if (c.dilation == Ints{1, 1}) {
        EXPECT_TRUE(all_close(avg_pool2d(xt, c.kernel, c.stride, c.padding), r.avg, 1e-6, 1e-7));
        EXPECT_TRUE(all_close(avg_pool2d(xt, c.kernel, c.stride, c.padding, false), r.avg_exclude,
                              1e-6, 1e-7));
      }
    }
  }
}

TEST(Pool, BackwardOpsMatchLoops) {
  for (const PoolCase& c : kCases) {
    SCOPED_TRACE(shape_str(c.x) + " kernel " + shape_str(c.kernel));
    Tensor x = uniform(c.x, -1, 1, 1);
    Tensor g = uniform(pooled(c), -1, 1, 2);
    Reference r = reference(c, x.to_vector<double>(), g.to_vector<double>());
    EXPECT_TRUE(all_close(max_pool2d_backward(g, x, c.kernel, c.stride, c.padding, c.dilation),
                          r.max_grad, 1e-12, 1e-12));
    if (c.dilation != Ints{1, 1}) continue;
    EXPECT_TRUE(all_close(avg_pool2d_backward(g, hw(c.x), c.kernel, c.stride, c.padding, true),
                          r.avg_grad, 1e-12, 1e-12));
    EXPECT_TRUE(all_close(avg_pool2d_backward(g, hw(c.x), c.kernel, c.stride, c.padding, false),
                          r.avg_exclude_grad, 1e-12, 1e-12));
  }
}

TEST(Pool, SelectPicksSourceAtArgmax) {
  Tensor x = make({1, 5, 2, 3, 4, 0, 7, 1, 9}, {1, 3, 3});
  Tensor source = make({10, 20, 30, 40, 50, 60, 70, 80, 90}, {1, 3, 3});
  // 2x2 windows with stride 1: maxima at 5 (index 1), 5 (1), 7 (6), 9 (8).
  EXPECT_TRUE(all_close(max_pool2d_select(x, source, {2, 2}, {1, 1}, {0, 0}, {1, 1}),
                        {20, 20, 70, 90}));
  EXPECT_TRUE(all_close(max_pool2d(x, 2, 1), {5, 5, 7, 9}));
}

TEST(Pool, TiesGoToFirstMaximumAndNanWins) {
  Tensor x = make({1, 1, 1, 1}, {1, 1, 2, 2}).set_requires_grad();
  sum(max_pool2d(x, 2)).backward();
  EXPECT_TRUE(all_close(x.grad(), {1, 0, 0, 0}));
  Tensor y = make({1, NAN, 3, 2}, {1, 1, 2, 2});
  EXPECT_TRUE(all_close(max_pool2d(y, 2), {NAN}));
  // As in PyTorch, every NaN takes over, so the gradient goes to the last one.
  Tensor w = make({NAN, 1, NAN, 0}, {1, 1, 2, 2}).set_requires_grad();
  sum(max_pool2d(w, 2)).backward();
  EXPECT_TRUE(all_close(w.grad(), {0, 0, 1, 0}));
  Tensor z = make({-INFINITY, -INFINITY, -INFINITY, -INFINITY}, {1, 1, 2, 2});
  EXPECT_TRUE(all_close(max_pool2d(z, 2), {-INFINITY}));
}

TEST(Pool, StridedInputAndIntOverloads) {
  Tensor base = uniform({2, 3, 6, 5}, -1, 1, 3);
  Tensor x = base.transpose(2, 3);  // [2, 3, 5, 6], not contiguous
  EXPECT_FALSE(x.is_contiguous());
  PoolCase c{{2, 3, 5, 6}, {2, 2}, {2, 2}, {1, 1}, {1, 1}};
  Reference r = reference(c, x.to_vector<double>(), {});
  EXPECT_TRUE(all_close(max_pool2d(x, 2, std::nullopt, 1), r.max, 1e-12, 1e-12));
  EXPECT_TRUE(all_close(avg_pool2d(x, 2, 2, 1), r.avg, 1e-12, 1e-12));
}

TEST(Pool, GradientsMatchFiniteDifferences) {
  for (const PoolCase& c : kCases) {
    SCOPED_TRACE(shape_str(c.x) + " kernel " + shape_str(c.kernel));
    Tensor x = uniform(c.x, -1, 1, 4).set_requires_grad();
    auto max_fn = [c](const std::vector<Tensor>& in) {
      Tensor y = max_pool2d(in[0], c.kernel, c.stride, c.padding, c.dilation);
      return mul(y, y);
    };
    EXPECT_TRUE(gradcheck(max_fn, {x}));
    EXPECT_TRUE(gradgradcheck(max_fn, {x}));
    if (c.dilation != Ints{1, 1}) continue;
    for (bool include : {true, false}) {
      auto avg_fn = [c, include](const std::vector<Tensor>& in) {
        Tensor y = avg_pool2d(in[0], c.kernel, c.stride, c.padding, include);
        return mul(y, y);
      };
      EXPECT_TRUE(gradcheck(avg_fn, {x}));
      EXPECT_TRUE(gradgradcheck(avg_fn, {x}));
    }
  }
}

TEST(Pool, BackwardOpGradients) {
  const PoolCase& c = kCases[0];
  Tensor x = uniform(c.x, -1, 1, 5);
  Tensor g = uniform(pooled(c), -1, 1, 6).set_requires_grad();
  Tensor source = uniform(c.x, -1, 1, 7).set_requires_grad();
  EXPECT_TRUE(gradcheck(
      [&](const std::vector<Tensor>& in) {
        return max_pool2d_backward(in[0], x, c.kernel, c.stride, c.padding, c.dilation);
      },
      {g}));
  EXPECT_TRUE(gradcheck(
      [&](const std::vector<Tensor>& in) {
        return max_pool2d_select(x, in[0], c.kernel, c.stride, c.padding, c.dilation);
      },
      {source}));
  EXPECT_TRUE(gradcheck(
      [&](const std::vector<Tensor>& in) {
        return avg_pool2d_backward(in[0], hw(c.x), c.kernel, c.stride, c.padding, false);
      },
      {g}));
  // The input of max_pool2d_backward only picks positions: no gradient.
  Tensor xr = x.detach().set_requires_grad();
  Tensor out = max_pool2d_backward(g.detach(), xr, c.kernel, c.stride, c.padding, c.dilation);
  EXPECT_TRUE(out.requires_grad());
  auto grads = grad({sum(out)}, {xr}, {}, false, false, true);
  EXPECT_FALSE(grads[0].defined());
}

TEST(Pool, EmptyBatch) {
  EXPECT_EQ(max_pool2d(zeros({0, 3, 4, 4}), 2).shape(), (Shape{0, 3, 2, 2}));
  EXPECT_EQ(avg_pool2d(zeros({0, 3, 4, 4}), 2).shape(), (Shape{0, 3, 2, 2}));
}

TEST(Pool, IntegerAverageDividesTowardsZero) {
  // As PyTorch's integer kernels: the window sum divided in integers.
  Tensor x = make({-27, -20, -13, -6, 5, 8}, {1, 1, 6}, DType::i64);
  Tensor y = avg_pool1d(x, 2);
  EXPECT_EQ(y.dtype(), DType::i64);
  EXPECT_EQ(y.to_vector<int64_t>(), (std::vector<int64_t>{-23, -9, 6}));
  Tensor z = avg_pool2d(make({1, 2, 4, 7}, {1, 1, 2, 2}, DType::i32), {2, 2}, {}, {0, 0}, true,
                        false, 3);
  EXPECT_EQ(z.dtype(), DType::i32);
  EXPECT_EQ(z.to(DType::i64).to_vector<int64_t>(), (std::vector<int64_t>{4}));
}

TEST(Pool, ErrorsNameOpAndShapes) {
  auto expect_error = [](const std::function<void()>& fn, std::vector<std::string> parts) {
    SCOPED_TRACE(parts[0]);
    std::string message = error_of(fn);
    for (const std::string& part : parts) EXPECT_HAS(message, part);
  };
  expect_error([] { max_pool2d(zeros({4, 4}), 2); }, {"[max_pool2d]", "[4, 4]", "4-D"});
  expect_error([] { max_pool2d(zeros({1, 1, 4, 4}), 2, 1, 2); }, {"[max_pool2d] padding", "half"});
  expect_error([] { avg_pool2d(zeros({1, 1, 2, 2}), 3); }, {"[avg_pool2d]", "[1, 1, 2, 2]"});
  expect_error([] { avg_pool2d(zeros({1, 1, 4, 4}, DType::boolean), 2); },
               {"[avg_pool2d] needs a floating"});
  expect_error([] { max_pool2d(zeros({1, 1, 4, 4}), {2, 2, 2}); },
               {"[max_pool2d] kernel_size needs 2 values"});
  expect_error([] { max_pool2d(zeros({1, 1, 0, 4}), 1); }, {"[max_pool2d]", "empty spatial"});
  expect_error(
      [] {
        max_pool2d_backward(zeros({1, 1, 3, 3}), zeros({1, 1, 4, 4}), {2, 2}, {}, {0, 0}, {1, 1});
      },
      {"[max_pool2d_backward]", "[1, 1, 3, 3]", "[1, 1, 2, 2]"});
  expect_error(
      [] { avg_pool2d_backward(zeros({1, 1, 3, 3}), {4, 4}, {2, 2}, {}, {0, 0}, true); },
      {"[avg_pool2d_backward]", "[1, 1, 3, 3]"});
}

Attrs pool_attrs(Ints kernel, Ints stride, Ints padding) {
  return {{"kernel_size", kernel}, {"stride", stride}, {"padding", padding}};
}
Attrs max_attrs(Ints kernel, Ints stride, Ints padding, Ints dilation) {
  return pool_attrs(kernel, stride, padding).set("dilation", dilation);
}

TESSERA_SBP_CASE("max_pool2d", [] { return std::vector<Tensor>{uniform({4, 3, 7, 6}, -1, 1, 1)}; },
                 max_attrs({3, 2}, {2, 1}, {1, 1}, {1, 1}));
TESSERA_SBP_CASE("max_pool2d", [] { return std::vector<Tensor>{uniform({5, 8, 8}, -1, 1, 1)}; },
                 max_attrs({2, 2}, {2, 2}, {1, 0}, {2, 1}));
TESSERA_SBP_CASE("max_pool2d_backward", [] {
  return std::vector<Tensor>{uniform({4, 3, 4, 7}, -1, 1, 2), uniform({4, 3, 7, 6}, -1, 1, 1)};
}, max_attrs({3, 2}, {2, 1}, {1, 1}, {1, 1}));
TESSERA_SBP_CASE("max_pool2d_select", [] {
  return std::vector<Tensor>{uniform({4, 3, 7, 6}, -1, 1, 1), uniform({4, 3, 7, 6}, -1, 1, 2)};
}, max_attrs({3, 2}, {2, 1}, {1, 1}, {1, 1}));
TESSERA_SBP_CASE("avg_pool2d", [] { return std::vector<Tensor>{uniform({4, 3, 7, 6}, -1, 1, 1)}; },
                 pool_attrs({3, 2}, {2, 1}, {1, 1}).set("count_include_pad", false));
TESSERA_SBP_CASE("avg_pool2d", [] { return std::vector<Tensor>{uniform({5, 7, 6}, -1, 1, 1)}; },
                 pool_attrs({3, 3}, {1, 2}, {1, 1}).set("count_include_pad", true));
TESSERA_SBP_CASE("avg_pool2d_backward", [] {
  return std::vector<Tensor>{uniform({4, 3, 4, 7}, -1, 1, 2)};
}, pool_attrs({3, 2}, {2, 1}, {1, 1}).set("count_include_pad", true).set("input_size", Ints{7, 6}));

const PoolCase kCeilCases[] = {
    {{1, 2, 5, 5}, {2, 2}, {2, 2}, {0, 0}, {1, 1}, true},
    {{2, 1, 7, 6}, {3, 3}, {2, 2}, {1, 1}, {1, 1}, true},
    {{1, 1, 6, 8}, {2, 3}, {3, 2}, {1, 1}, {1, 1}, true},  // a window starting in the padding
    {{3, 6, 7}, {2, 2}, {2, 3}, {0, 1}, {2, 1}, true},
};

TEST(Pool, CeilModeMatchesLoops) {
  for (const PoolCase& c : kCeilCases) {
    SCOPED_TRACE(shape_str(c.x) + " kernel " + shape_str(c.kernel));
    Tensor x = uniform(c.x, -1, 1, 1);
    Tensor g = uniform(pooled(c), -1, 1, 2);
    Reference r = reference(c, x.to_vector<double>(), g.to_vector<double>());
    Tensor max_out = max_pool2d(x, c.kernel, c.stride, c.padding, c.dilation, true);
    EXPECT_EQ(max_out.shape(), pooled(c));
    EXPECT_TRUE(all_close(max_out, r.max, 1e-12, 1e-12));
    EXPECT_TRUE(all_close(
        max_pool2d_backward(g, x, c.kernel, c.stride, c.padding, c.dilation, true), r.max_grad,
        1e-12, 1e-12));
    auto max_fn = [c](const std::vector<Tensor>& in) {
      return max_pool2d(in[0], c.kernel, c.stride, c.padding, c.dilation, true);
    };
    EXPECT_TRUE(gradcheck(max_fn, {x.detach().set_requires_grad()}));
    if (c.dilation != Ints{1, 1}) continue;
    for (bool include : {true, false}) {
      Tensor avg = avg_pool2d(x, c.kernel, c.stride, c.padding, include, true);
      EXPECT_EQ(avg.shape(), pooled(c));
      EXPECT_TRUE(all_close(avg, include ? r.avg : r.avg_exclude, 1e-12, 1e-12));
      EXPECT_TRUE(all_close(
          avg_pool2d_backward(g, hw(c.x), c.kernel, c.stride, c.padding, include, true),
          include ? r.avg_grad : r.avg_exclude_grad, 1e-12, 1e-12));
      auto avg_fn = [c, include](const std::vector<Tensor>& in) {
        Tensor y = avg_pool2d(in[0], c.kernel, c.stride, c.padding, include, true);
        return mul(y, y);
      };
      EXPECT_TRUE(gradcheck(avg_fn, {x.detach().set_requires_grad()}));
      EXPECT_TRUE(gradgradcheck(avg_fn, {x.detach().set_requires_grad()}));
    }
  }
}

TEST(Pool, CeilModeHandValues) {
  // PyTorch: 5x5 ones, kernel 2, stride 2, padding 1, ceil_mode: 3x3 windows,
  // the corner ones cover one input element of four padded positions.
  Tensor ones5 = ones({1, 1, 5, 5}, DType::f64);
  EXPECT_TRUE(all_close(avg_pool2d(ones5, 2, 2, 1, true, true),
                        {0.25, 0.5, 0.5, 0.5, 1, 1, 0.5, 1, 1}));
  EXPECT_TRUE(all_close(avg_pool2d(ones5, 3, 2, 1, true, true),
                        {4. / 9, 6. / 9, 4. / 9, 6. / 9, 1, 6. / 9, 4. / 9, 6. / 9, 4. / 9}));
  EXPECT_EQ(max_pool2d(zeros({1, 1, 5, 5}), 2, std::nullopt, 0, 1, true).shape(),
            (Shape{1, 1, 3, 3}));
  EXPECT_EQ(max_pool2d(zeros({1, 1, 5, 5}), 2).shape(), (Shape{1, 1, 2, 2}));
}

TEST(Pool, DivisorOverride) {
  Tensor x = uniform({2, 3, 5, 4}, -1, 1, 1);
  PoolCase c{{2, 3, 5, 4}, {2, 3}, {2, 1}, {1, 1}, {1, 1}};
  Tensor g = uniform(pooled(c), -1, 1, 2);
  Reference r = reference(c, x.to_vector<double>(), g.to_vector<double>());
  std::vector<double> want, want_grad(r.avg_grad.size());
  for (double v : r.avg) want.push_back(v);
  // avg (count_include_pad) times the padded window size 6, over 5.
  for (double& v : want) v = v * 6 / 5;
  for (size_t i = 0; i < want_grad.size(); ++i) want_grad[i] = r.avg_grad[i] * 6 / 5;
  EXPECT_TRUE(all_close(avg_pool2d(x, c.kernel, c.stride, c.padding, true, false, 5), want, 1e-12,
                        1e-12));
  EXPECT_TRUE(all_close(
      avg_pool2d_backward(g, hw(c.x), c.kernel, c.stride, c.padding, true, false, 5), want_grad,
      1e-12, 1e-12));
  EXPECT_TRUE(gradcheck(
      [c](const std::vector<Tensor>& in) {
        return avg_pool2d(in[0], c.kernel, c.stride, c.padding, false, true, 3);
      },
      {x.detach().set_requires_grad()}));
  EXPECT_HAS(error_of([&] { avg_pool2d(x, 2, 2, 0, true, false, 0); }),
             "[avg_pool2d] divisor_override");
}

TEST(Pool, ReturnIndicesAreFlatInThePlane) {
  Tensor x = make({0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}, {1, 1, 4, 4});
  auto [values, indices] = max_pool2d_with_indices(x, {2, 2});
  EXPECT_EQ(indices.dtype(), DType::i64);
  EXPECT_TRUE(all_close(values, {5, 7, 13, 15}));
  EXPECT_TRUE(all_close(indices, {5, 7, 13, 15}));
  // Every plane restarts at 0; indices agree with the values they point at.
  for (const PoolCase& c : kCases) {
    SCOPED_TRACE(shape_str(c.x) + " kernel " + shape_str(c.kernel));
    Tensor input = uniform(c.x, -1, 1, 3);
    auto [v, i] = max_pool2d_with_indices(input, c.kernel, c.stride, c.padding, c.dilation);
    EXPECT_TRUE(all_close(v, max_pool2d(input, c.kernel, c.stride, c.padding, c.dilation), 0, 0));
    const int64_t plane = c.x[c.x.size() - 2] * c.x.back();
    const int64_t out_plane = v.size(-2) * v.size(-1);
    std::vector<double> vi = i.to_vector<double>(), vv = v.to_vector<double>();
    std::vector<double> vx = input.to_vector<double>();
    for (size_t k = 0; k < vi.size(); ++k) {
      const int64_t p = static_cast<int64_t>(k) / out_plane;
      ASSERT_GE(vi[k], 0);
      ASSERT_LT(vi[k], plane);
      EXPECT_EQ(vx[p * plane + static_cast<int64_t>(vi[k])], vv[k]);
    }
  }
  // Gradients flow through the values.
  Tensor xg = uniform({2, 2, 5, 5}, -1, 1, 4).set_requires_grad();
  EXPECT_TRUE(gradcheck(
      [](const std::vector<Tensor>& in) {
        return max_pool2d_with_indices(in[0], {3, 3}, {2, 2}, {1, 1}, {1, 1}, true).first;
      },
      {xg}));
}

TEST(Pool, OneDimensionalPoolsAreTwoDimensionalOverAHeightOfOne) {
  Tensor x = make({3, 1, 4, 1, 5, 9, 2, 6}, {1, 1, 8});
  EXPECT_TRUE(all_close(max_pool1d(x, 2), {3, 4, 9, 6}));
  EXPECT_TRUE(all_close(avg_pool1d(x, 2), {2, 2.5, 7, 4}));
  EXPECT_TRUE(all_close(max_pool1d(x, 3, 2, 1, 1, true), {3, 4, 9, 9, 6}));
  auto [values, indices] = max_pool1d_with_indices(x, 3, 3);
  EXPECT_TRUE(all_close(values, {4, 9}));
  EXPECT_TRUE(all_close(indices, {2, 5}));
  Tensor batch = uniform({2, 3, 9}, -1, 1, 1);
  EXPECT_TRUE(all_close(max_pool1d(batch, 3, 2, 1, 2),
                        max_pool2d(batch.unsqueeze(2), {1, 3}, {1, 2}, {0, 1}, {1, 2}).squeeze(2),
                        0, 0));
  EXPECT_TRUE(all_close(avg_pool1d(batch, 4, 3, 2, false, true),
                        avg_pool2d(batch.unsqueeze(2), {1, 4}, {1, 3}, {0, 2}, false, true)
                            .squeeze(2),
                        0, 0));
  // Unbatched [C, L].
  EXPECT_EQ(max_pool1d(batch.select(0, 1), 2).shape(), (Shape{3, 4}));
  EXPECT_TRUE(gradcheck(
      [](const std::vector<Tensor>& in) { return avg_pool1d(in[0], 3, 2, 1, true, true); },
      {batch.detach().set_requires_grad()}));
  EXPECT_HAS(error_of([] { max_pool1d(zeros({8}), 2); }), "[max_pool1d] expects");
}

// Adaptive windows: [floor(i * in / out), ceil((i + 1) * in / out)).
std::vector<std::vector<int64_t>> adaptive_members(const Shape& x, const Ints& out) {
  const int64_t h = x[x.size() - 2], w = x.back();
  int64_t planes = 1;
  for (size_t d = 0; d + 2 < x.size(); ++d) planes *= x[d];
  std::vector<std::vector<int64_t>> windows;
  for (int64_t p = 0; p < planes; ++p)
    for (int64_t i = 0; i < out[0]; ++i)
      for (int64_t j = 0; j < out[1]; ++j) {
        std::vector<int64_t> members;
        for (int64_t y = i * h / out[0]; y < ((i + 1) * h + out[0] - 1) / out[0]; ++y)
          for (int64_t z = j * w / out[1]; z < ((j + 1) * w + out[1] - 1) / out[1]; ++z)
            members.push_back((p * h + y) * w + z);
        windows.push_back(members);
      }
  return windows;
}

TEST(AdaptivePool, MatchesLoops) {
  struct Case {
    Shape x;
    Ints out;
  };
  const Case cases[] = {{{2, 3, 5, 7}, {3, 4}}, {{3, 4, 4}, {2, 2}}, {{1, 2, 3, 5}, {5, 7}},
                        {{1, 1, 6, 6}, {1, 1}}};
  for (const Case& c : cases) {
    SCOPED_TRACE(shape_str(c.x) + " to " + shape_str(c.out));
    Tensor x = uniform(c.x, -1, 1, 1);
    std::vector<double> vx = x.to_vector<double>();
    std::vector<double> want_max, want_avg, want_index;
    for (const auto& members : adaptive_members(c.x, c.out)) {
      int64_t best = members[0];
      double total = 0;
      for (int64_t m : members) {
        if (vx[m] > vx[best]) best = m;
        total += vx[m];
      }
      want_max.push_back(vx[best]);
      want_index.push_back(static_cast<double>(best % (c.x[c.x.size() - 2] * c.x.back())));
      want_avg.push_back(total / static_cast<double>(members.size()));
    }
    Shape shape(c.x.begin(), c.x.end() - 2);
    shape.insert(shape.end(), c.out.begin(), c.out.end());
    Tensor avg = adaptive_avg_pool2d(x, c.out);
    EXPECT_EQ(avg.shape(), shape);
    EXPECT_TRUE(all_close(avg, want_avg, 1e-12, 1e-12));
    auto [values, indices] = adaptive_max_pool2d_with_indices(x, c.out);
    EXPECT_EQ(values.shape(), shape);
    EXPECT_TRUE(all_close(values, want_max, 0, 0));
    EXPECT_TRUE(all_close(indices, want_index, 0, 0));
    EXPECT_TRUE(all_close(adaptive_max_pool2d(x.to(DType::f32), c.out), want_max, 1e-6, 1e-7));
    auto avg_fn = [c](const std::vector<Tensor>& in) {
      Tensor y = adaptive_avg_pool2d(in[0], c.out);
      return mul(y, y);
    };
    auto max_fn = [c](const std::vector<Tensor>& in) {
      Tensor y = adaptive_max_pool2d(in[0], c.out);
      return mul(y, y);
    };
    EXPECT_TRUE(gradcheck(avg_fn, {x.detach().set_requires_grad()}));
    EXPECT_TRUE(gradgradcheck(avg_fn, {x.detach().set_requires_grad()}));
    EXPECT_TRUE(gradcheck(max_fn, {x.detach().set_requires_grad()}));
    EXPECT_TRUE(gradgradcheck(max_fn, {x.detach().set_requires_grad()}));
  }
  // -1 keeps the input size; an output of 0 is empty; empty batches pool.
  EXPECT_EQ(adaptive_avg_pool2d(zeros({1, 2, 5, 7}), {-1, 3}).shape(), (Shape{1, 2, 5, 3}));
  EXPECT_EQ(adaptive_max_pool2d(zeros({1, 2, 5, 7}), 0).shape(), (Shape{1, 2, 0, 0}));
  EXPECT_EQ(adaptive_avg_pool2d(zeros({0, 2, 5, 7}), 3).shape(), (Shape{0, 2, 3, 3}));
  EXPECT_HAS(error_of([] { adaptive_avg_pool2d(zeros({1, 2, 0, 7}), 3); }),
             "[adaptive_avg_pool2d]");
  Tensor line = make({3, 1, 4, 1, 5}, {1, 5});
  EXPECT_TRUE(all_close(adaptive_max_pool1d(line, 2), {4, 5}));
  EXPECT_TRUE(all_close(adaptive_avg_pool1d(line, 2), {8. / 3, 10. / 3}));
}

TESSERA_SBP_CASE("max_pool2d_with_indices",
                 [] { return std::vector<Tensor>{uniform({4, 3, 7, 6}, -1, 1, 1)}; },
                 max_attrs({3, 2}, {2, 1}, {1, 1}, {1, 1}).set("ceil_mode", true));
TESSERA_SBP_CASE("adaptive_max_pool2d",
                 [] { return std::vector<Tensor>{uniform({4, 3, 7, 6}, -1, 1, 1)}; },
                 Attrs{{"output_size", Ints{3, 4}}});
TESSERA_SBP_CASE("adaptive_avg_pool2d",
                 [] { return std::vector<Tensor>{uniform({5, 7, 6}, -1, 1, 1)}; },
                 Attrs{{"output_size", Ints{4, 4}}});
TESSERA_SBP_CASE("avg_pool2d",
                 [] { return std::vector<Tensor>{uniform({4, 3, 7, 6}, -1, 1, 1)}; },
                 pool_attrs({3, 2}, {2, 2}, {1, 1})
                     .set("count_include_pad", true)
                     .set("ceil_mode", true)
                     .set("divisor_override", int64_t{4}));

TEST(MaxPool2dHugeKernel, FinishesWithTheWindowClippedToTheInput) {
  // A 2^40 kernel with padding 2^39 covers the whole 3x3 input in one window
  // (PyTorch rejects it only because its kernels count in 32 bits).
  Tensor x = Tensor::from_vector<double>({1, 5, 2, 7, 3, 4, 0, 6, 8}, {1, 1, 3, 3});
  const int64_t kernel = int64_t{1} << 40;
  Tensor y = max_pool2d(x, kernel, std::nullopt, kernel / 2);
  EXPECT_EQ(y.shape(), (Shape{1, 1, 1, 1}));
  EXPECT_TRUE(all_close(y, {8}));
  Tensor mean = avg_pool2d(x, kernel, std::nullopt, kernel / 2);
  EXPECT_EQ(mean.shape(), (Shape{1, 1, 1, 1}));
  EXPECT_HAS(error_of([&] { max_pool2d(x, kernel); }), "[max_pool2d]");
}

}  // namespace
}  // namespace tessera::testing
