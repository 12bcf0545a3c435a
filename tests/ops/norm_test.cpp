#include <cmath>

#include "testing.h"

namespace tessera::testing {
namespace {

// Layer norm over the last `n` elements of each row, by loops in double.
std::vector<double> reference(const Tensor& x, int64_t n, const Tensor& weight, const Tensor& bias,
                              double eps) {
  std::vector<double> v = x.to_vector<double>();
  std::vector<double> w =
      weight.defined() ? weight.to_vector<double>() : std::vector<double>(n, 1.0);
  std::vector<double> b = bias.defined() ? bias.to_vector<double>() : std::vector<double>(n, 0.0);
  std::vector<double> out(v.size());
  for (size_t row = 0; row * n < v.size(); ++row) {
    double mean = 0, var = 0;
    for (int64_t i = 0; i < n; ++i) mean += v[row * n + i];
    mean /= n;
    for (int64_t i = 0; i < n; ++i) var += (v[row * n + i] - mean) * (v[row * n + i] - mean);
    var /= n;
    for (int64_t i = 0; i < n; ++i) {
      out[row * n + i] = (v[row * n + i] - mean) / std::sqrt(var + eps) * w[i] + b[i];
    }
  }
  return out;
}

TEST(LayerNorm, AgainstLoopsWithAndWithoutAffine) {
  Tensor x = uniform({4, 6}, -3, 3, 1);
  Tensor w = uniform({6}, 0.5, 1.5, 2);
  Tensor b = uniform({6}, -1, 1, 3);
  EXPECT_TRUE(all_close(layer_norm(x, {6}, w, b), reference(x, 6, w, b, 1e-5), 1e-12, 1e-12));
  EXPECT_TRUE(all_close(layer_norm(x, {6}, w), reference(x, 6, w, {}, 1e-5), 1e-12, 1e-12));
  EXPECT_TRUE(all_close(layer_norm(x, {6}, {}, b), reference(x, 6, {}, b, 1e-5), 1e-12, 1e-12));
  EXPECT_TRUE(all_close(layer_norm(x, {6}), reference(x, 6, {}, {}, 1e-5), 1e-12, 1e-12));
  EXPECT_TRUE(
      all_close(layer_norm(x, {6}, {}, {}, 0.5), reference(x, 6, {}, {}, 0.5), 1e-12, 1e-12));
  Tensor x32 = x.to(DType::f32);
  Tensor y32 = layer_norm(x32, {6}, w.to(DType::f32), b.to(DType::f32));
  EXPECT_EQ(y32.dtype(), DType::f32);
  EXPECT_TRUE(all_close(y32, reference(x32, 6, w, b, 1e-5), 1e-5, 1e-5));
}

TEST(LayerNorm, SeveralNormalizedDimsAndStridedInput) {
  Tensor x = uniform({2, 3, 4}, -2, 2, 4);
  Tensor w = uniform({3, 4}, 0.5, 1.5, 5);
  Tensor b = uniform({3, 4}, -1, 1, 6);
  EXPECT_TRUE(all_close(layer_norm(x, {3, 4}, w, b), reference(x, 12, w, b, 1e-5), 1e-12, 1e-12));
  Tensor transposed = uniform({4, 5}, -2, 2, 7).t();  // [5, 4], strided
  EXPECT_FALSE(transposed.is_contiguous());
  EXPECT_TRUE(all_close(layer_norm(transposed, {4}),
                        reference(transposed.contiguous(), 4, {}, {}, 1e-5), 1e-12, 1e-12));
  Tensor strided_w = uniform({8}, 0.5, 1.5, 8).slice(0, 0, 8, 2);  // [4], stride 2
  EXPECT_TRUE(all_close(layer_norm(transposed, {4}, strided_w),
                        reference(transposed.contiguous(), 4, strided_w, {}, 1e-5), 1e-12, 1e-12));
}

TEST(LayerNorm, F32AccuracyOnLongOffsetRows) {
  // A large common offset: a one-pass E[x^2] - E[x]^2 would cancel badly.
  for (int64_t n : {7, 1037, 4096}) {
    SCOPED_TRACE(n);
    Tensor x = add(uniform({3, n}, -1, 1, static_cast<uint64_t>(n)), 1000.0).to(DType::f32);
    EXPECT_TRUE(all_close(layer_norm(x, {n}), reference(x, n, {}, {}, 1e-5), 1e-4, 2e-4));
  }
}

TEST(LayerNorm, StatisticsOutputs) {
  Tensor x = uniform({3, 5}, -2, 2, 9);
  std::vector<Tensor> out = call(
      find_op("layer_norm"), {x},
      {{"normalized_shape", Shape{5}}, {"eps", 1e-5}, {"has_weight", false}, {"has_bias", false}});
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(out[1].shape(), (Shape{3, 1}));
  std::vector<double> v = x.to_vector<double>(), means, rstds;
  for (int r = 0; r < 3; ++r) {
    double m = 0, var = 0;
    for (int i = 0; i < 5; ++i) m += v[r * 5 + i] / 5;
    for (int i = 0; i < 5; ++i) var += (v[r * 5 + i] - m) * (v[r * 5 + i] - m) / 5;
    means.push_back(m);
    rstds.push_back(1 / std::sqrt(var + 1e-5));
  }
  EXPECT_TRUE(all_close(out[1], means, 1e-12, 1e-12));
  EXPECT_TRUE(all_close(out[2], rstds, 1e-12, 1e-12));
}

TEST(LayerNorm, EmptyBatch) {
  EXPECT_EQ(layer_norm(zeros({0, 4}), {4}).shape(), (Shape{0, 4}));
}

TEST(LayerNorm, Gradients) {
  Tensor x = uniform({3, 4}, -2, 2, 10).set_requires_grad();
  Tensor w = uniform({4}, 0.5, 1.5, 11).set_requires_grad();
  Tensor b = uniform({4}, -1, 1, 12).set_requires_grad();
  auto full = [](const std::vector<Tensor>& in) { return layer_norm(in[0], {4}, in[1], in[2]); };
  EXPECT_TRUE(gradcheck(full, {x, w, b}));
  EXPECT_TRUE(gradgradcheck(full, {x, w, b}));
  auto plain = [](const std::vector<Tensor>& in) { return layer_norm(in[0], {4}); };
  EXPECT_TRUE(gradcheck(plain, {x}));
  EXPECT_TRUE(gradgradcheck(plain, {x}));
  auto bias_only = [](const std::vector<Tensor>& in) { return layer_norm(in[0], {4}, {}, in[1]); };
  EXPECT_TRUE(gradcheck(bias_only, {x, b}));
  // Two normalised dims and a batch of 2 x 2.
  Tensor y = uniform({2, 2, 2, 3}, -2, 2, 13).set_requires_grad();
  Tensor w2 = uniform({2, 3}, 0.5, 1.5, 14).set_requires_grad();
  auto two = [](const std::vector<Tensor>& in) { return layer_norm(in[0], {2, 3}, in[1]); };
  EXPECT_TRUE(gradcheck(two, {y, w2}));
  EXPECT_TRUE(gradgradcheck(two, {y, w2}));
}

TEST(LayerNorm, GradientsOfStatisticsOutputs) {
  Tensor x = uniform({3, 4}, -2, 2, 15).set_requires_grad();
  auto stats = [](const std::vector<Tensor>& in) {
    std::vector<Tensor> out = call(find_op("layer_norm"), {in[0]},
                                   {{"normalized_shape", Shape{4}},
                                    {"eps", 1e-5},
                                    {"has_weight", false},
                                    {"has_bias", false}});
    return add(add(out[0], mul(out[1], 2.0)), mul(out[2], 3.0));
  };
  EXPECT_TRUE(gradcheck(stats, {x}));
  EXPECT_TRUE(gradgradcheck(stats, {x}));
}

Attrs backward_attrs(const Shape& normalized, bool has_weight) {
  return {{"normalized_shape", normalized}, {"has_weight", has_weight}};
}

TEST(LayerNormBackward, AgainstLoops) {
  const int64_t rows = 3, n = 37;  // 37: vector body plus tail
  Tensor g = uniform({rows, n}, -1, 1, 30);
  Tensor x = uniform({rows, n}, -2, 2, 31);
  Tensor w = uniform({n}, 0.5, 1.5, 32);
  std::vector<double> gv = g.to_vector<double>(), xv = x.to_vector<double>();
  std::vector<double> wv = w.to_vector<double>();
  std::vector<double> means, rstds, dx(rows * n), gamma(n, 0.0), beta(n, 0.0);
  for (int64_t r = 0; r < rows; ++r) {
    double m = 0, var = 0;
    for (int64_t i = 0; i < n; ++i) m += xv[r * n + i] / n;
    for (int64_t i = 0; i < n; ++i) var += (xv[r * n + i] - m) * (xv[r * n + i] - m) / n;
    const double rs = 1 / std::sqrt(var + 1e-5);
    means.push_back(m);
    rstds.push_back(rs);
    double a_mean = 0, ax_mean = 0;
    for (int64_t i = 0; i < n; ++i) {
      const double a = gv[r * n + i] * wv[i], xhat = (xv[r * n + i] - m) * rs;
      a_mean += a / n;
      ax_mean += a * xhat / n;
      gamma[i] += gv[r * n + i] * xhat;
      beta[i] += gv[r * n + i];
    }
    for (int64_t i = 0; i < n; ++i) {
      const double a = gv[r * n + i] * wv[i], xhat = (xv[r * n + i] - m) * rs;
      dx[r * n + i] = rs * (a - a_mean - xhat * ax_mean);
    }
  }
  Tensor mean_t = make(means, {rows, 1}), rstd_t = make(rstds, {rows, 1});
  for (DType dtype : {DType::f64, DType::f32}) {
    SCOPED_TRACE(dtype_name(dtype));
    const double tol = dtype == DType::f64 ? 1e-12 : 2e-5;
    std::vector<Tensor> out =
        call(find_op("layer_norm_backward"),
             {g.to(dtype), x.to(dtype), mean_t.to(dtype), rstd_t.to(dtype), w.to(dtype)},
             backward_attrs({n}, true));
    EXPECT_TRUE(all_close(out[0], dx, tol, tol));
    EXPECT_TRUE(all_close(out[1], gamma, tol, tol));
    EXPECT_TRUE(all_close(out[2], beta, tol, tol));
  }
  // The layer_norm gradients are these outputs.
  Tensor xr = x.detach().set_requires_grad(), wr = w.detach().set_requires_grad();
  Tensor b = zeros({n}, DType::f64).set_requires_grad();
  layer_norm(xr, {n}, wr, b).backward(g);
  EXPECT_TRUE(all_close(xr.grad(), dx, 1e-12, 1e-12));
  EXPECT_TRUE(all_close(wr.grad(), gamma, 1e-12, 1e-12));
  EXPECT_TRUE(all_close(b.grad(), beta, 1e-12, 1e-12));
}

TEST(LayerNormBackward, ManyRowsSplitIntoTasks) {
  // Enough rows for several tasks: the per-task dgamma partials must add up.
  Tensor x = uniform({300, 64}, -2, 2, 33).set_requires_grad();
  Tensor w = uniform({64}, 0.5, 1.5, 34).set_requires_grad();
  Tensor g = uniform({300, 64}, -1, 1, 35);
  layer_norm(x, {64}, w).backward(g);
  Tensor xhat = layer_norm(x.detach(), {64});
  EXPECT_TRUE(all_close(w.grad(), sum(mul(g, xhat), {0}), 1e-10, 1e-10));
}

TEST(LayerNormBackward, GradientsAsAnOpOfFiveInputs) {
  // mean and rstd are independent inputs of the backward op.
  Tensor g = uniform({3, 4}, -1, 1, 36).set_requires_grad();
  Tensor x = uniform({3, 4}, -2, 2, 37).set_requires_grad();
  Tensor mu = uniform({3, 1}, -0.5, 0.5, 38).set_requires_grad();
  Tensor rstd = uniform({3, 1}, 0.5, 1.5, 39).set_requires_grad();
  Tensor w = uniform({4}, 0.5, 1.5, 40).set_requires_grad();
  auto with_weight = [](const std::vector<Tensor>& in) {
    std::vector<Tensor> out = call(find_op("layer_norm_backward"), in, backward_attrs({4}, true));
    return add(add(out[0], mul(out[1], 2.0)), mul(out[2], -3.0));
  };
  EXPECT_TRUE(gradcheck(with_weight, {g, x, mu, rstd, w}));
  EXPECT_TRUE(gradgradcheck(with_weight, {g, x, mu, rstd, w}));
  auto without_weight = [](const std::vector<Tensor>& in) {
    std::vector<Tensor> out = call(find_op("layer_norm_backward"), in, backward_attrs({4}, false));
    return add(out[0], mul(out[1], 0.5));
  };
  EXPECT_TRUE(gradcheck(without_weight, {g, x, mu, rstd}));
}

TEST(LayerNorm, Errors) {
  Tensor x = zeros({2, 3, 4});
  try {
    layer_norm(x, {3});
    FAIL() << "expected an error";
  } catch (const Error& error) {
    std::string message = error.what();
    EXPECT_NE(message.find("[layer_norm]"), std::string::npos) << message;
    EXPECT_NE(message.find("[3]"), std::string::npos) << message;
    EXPECT_NE(message.find("[2, 3, 4]"), std::string::npos) << message;
  }
  try {
    layer_norm(x, {4}, zeros({3}));
    FAIL() << "expected an error";
  } catch (const Error& error) {
    std::string message = error.what();
    EXPECT_NE(message.find("weight has shape [3]"), std::string::npos) << message;
  }
  EXPECT_THROW(layer_norm(x, {4}, {}, zeros({4}, DType::f64)), Error);
  EXPECT_THROW(layer_norm(x, {}), Error);
  EXPECT_THROW(layer_norm(x, {1, 2, 3, 4}), Error);
  EXPECT_THROW(layer_norm(Tensor::from_vector<int64_t>({1, 2}, {2}), {2}), Error);
  EXPECT_THROW(rms_norm(x, {5}), Error);
}

TEST(RmsNorm, AgainstLoopsAndGradients) {
  Tensor x = uniform({3, 5}, -2, 2, 16);
  Tensor w = uniform({5}, 0.5, 1.5, 17);
  std::vector<double> v = x.to_vector<double>(), wv = w.to_vector<double>(), want, want_w;
  for (int r = 0; r < 3; ++r) {
    double ms = 0;
    for (int i = 0; i < 5; ++i) ms += v[r * 5 + i] * v[r * 5 + i] / 5;
    for (int i = 0; i < 5; ++i) {
      want.push_back(v[r * 5 + i] / std::sqrt(ms + 1e-6));
      want_w.push_back(want.back() * wv[i]);
    }
  }
  EXPECT_TRUE(all_close(rms_norm(x, {5}, {}, 1e-6), want, 1e-12, 1e-12));
  EXPECT_TRUE(all_close(rms_norm(x, {5}, w, 1e-6), want_w, 1e-12, 1e-12));
  // Default eps: the dtype's machine epsilon.
  Tensor z = zeros({2, 3});
  EXPECT_TRUE(all_close(rms_norm(z, {3}), std::vector<double>(6, 0.0)));
  auto f = [](const std::vector<Tensor>& in) { return rms_norm(in[0], {5}, in[1]); };
  EXPECT_TRUE(gradcheck(f, {x.set_requires_grad(), w.set_requires_grad()}));
  EXPECT_TRUE(gradgradcheck(f, {x, w}));
}

Tensor sbp_x() {
  return uniform({5, 3, 4}, -2, 2, 20);
}

TESSERA_SBP_CASE(
    "layer_norm",
    [] {
      return std::vector<Tensor>{sbp_x(), uniform({4}, 0.5, 1.5, 21), uniform({4}, -1, 1, 22)};
    },
    Attrs{{"normalized_shape", Shape{4}}, {"eps", 1e-5}, {"has_weight", true}, {"has_bias", true}});
TESSERA_SBP_CASE(
    "layer_norm", [] { return std::vector<Tensor>{sbp_x()}; },
    Attrs{{"normalized_shape", Shape{3, 4}},
          {"eps", 1e-5},
          {"has_weight", false},
          {"has_bias", false}});
TESSERA_SBP_CASE(
    "layer_norm",
    [] {
      return std::vector<Tensor>{sbp_x(), uniform({4}, -1, 1, 23)};
    },
    Attrs{
        {"normalized_shape", Shape{4}}, {"eps", 1e-5}, {"has_weight", false}, {"has_bias", true}});

TESSERA_SBP_CASE(
    "layer_norm_backward",
    [] {
      return std::vector<Tensor>{uniform({5, 3, 4}, -1, 1, 24), sbp_x(),
                                 uniform({5, 3, 1}, -0.5, 0.5, 25),
                                 uniform({5, 3, 1}, 0.5, 1.5, 26), uniform({4}, 0.5, 1.5, 27)};
    },
    Attrs{{"normalized_shape", Shape{4}}, {"has_weight", true}});
TESSERA_SBP_CASE(
    "layer_norm_backward",
    [] {
      return std::vector<Tensor>{uniform({5, 3, 4}, -1, 1, 28), sbp_x(),
                                 uniform({5, 1, 1}, -0.5, 0.5, 29),
                                 uniform({5, 1, 1}, 0.5, 1.5, 30)};
    },
    Attrs{{"normalized_shape", Shape{3, 4}}, {"has_weight", false}});

}  // namespace
}  // namespace tessera::testing
