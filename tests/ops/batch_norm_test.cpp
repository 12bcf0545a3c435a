#include <cmath>

#include "testing.h"
#include "torch_check.h"

namespace tessera::testing {
namespace {

// Batch norm of x [N, C, *] by loops in double: per-channel batch statistics
// (training) or the given mean / var, then the affine map. In training,
// `batch_mean` / `batch_var` receive the batch's mean and unbiased variance.
std::vector<double> reference(const Tensor& x, const std::vector<double>& weight,
                              const std::vector<double>& bias, bool training,
                              std::vector<double> mean, std::vector<double> var, double eps,
                              std::vector<double>* unbiased = nullptr) {
  const std::vector<double> v = x.contiguous().to_vector<double>();
  const int64_t n = x.size(0), channels = x.size(1);
  const int64_t plane = x.numel() / std::max<int64_t>(n * channels, 1);
  auto at = [&](int64_t i, int64_t c, int64_t j) { return v[(i * channels + c) * plane + j]; };
  if (training) {
    const double count = static_cast<double>(n * plane);
    mean.assign(channels, 0.0);
    var.assign(channels, 0.0);
    if (unbiased) unbiased->assign(channels, 0.0);
    for (int64_t c = 0; c < channels; ++c) {
      for (int64_t i = 0; i < n; ++i)
        for (int64_t j = 0; j < plane; ++j) mean[c] += at(i, c, j) / count;
      for (int64_t i = 0; i < n; ++i)
        for (int64_t j = 0; j < plane; ++j) var[c] += std::pow(at(i, c, j) - mean[c], 2) / count;
      if (unbiased) (*unbiased)[c] = var[c] * count / (count - 1);
    }
  }
  std::vector<double> out(v.size());
  for (int64_t i = 0; i < n; ++i)
    for (int64_t c = 0; c < channels; ++c)
      for (int64_t j = 0; j < plane; ++j)
        out[(i * channels + c) * plane + j] =
            (at(i, c, j) - mean[c]) / std::sqrt(var[c] + eps) * weight[c] + bias[c];
  return out;
}

TEST(BatchNorm, TrainingAndEvalAgainstLoops) {
  for (Shape shape : {Shape{6, 3}, Shape{4, 3, 5}, Shape{2, 3, 17, 9}, Shape{2, 3, 2, 3, 4}}) {
    SCOPED_TRACE(shape_str(shape));
    Tensor x = uniform(shape, -2, 3, 1);
    Tensor w = uniform({3}, 0.5, 1.5, 2), b = uniform({3}, -1, 1, 3);
    Tensor running_mean = uniform({3}, -1, 1, 4), running_var = uniform({3}, 0.5, 2, 5);
    const std::vector<double> rm0 = running_mean.to_vector<double>();
    const std::vector<double> rv0 = running_var.to_vector<double>();
    std::vector<double> unbiased;
    const std::vector<double> expected = reference(x, w.to_vector<double>(), b.to_vector<double>(),
                                                   true, {}, {}, 1e-5, &unbiased);
    Tensor y = batch_norm(x, running_mean, running_var, w, b, true, 0.25, 1e-5);
    EXPECT_TRUE(all_close(y, expected, 1e-10, 1e-10));
    std::vector<double> batch_mean(3, 0.0);
    reference(x, {1, 1, 1}, {0, 0, 0}, true, {}, {}, 1e-5);
    const std::vector<double> v = x.contiguous().to_vector<double>();
    const int64_t plane = x.numel() / (x.size(0) * 3);
    for (int64_t i = 0; i < x.size(0); ++i)
      for (int64_t c = 0; c < 3; ++c)
        for (int64_t j = 0; j < plane; ++j)
          batch_mean[c] += v[(i * 3 + c) * plane + j] / static_cast<double>(x.size(0) * plane);
    std::vector<double> new_mean(3), new_var(3);
    for (int c = 0; c < 3; ++c) {
      new_mean[c] = 0.75 * rm0[c] + 0.25 * batch_mean[c];
      new_var[c] = 0.75 * rv0[c] + 0.25 * unbiased[c];
    }
    EXPECT_TRUE(all_close(running_mean, new_mean, 1e-10, 1e-12));
    EXPECT_TRUE(all_close(running_var, new_var, 1e-10, 1e-12));
    Tensor eval = batch_norm(x, running_mean, running_var, w, b, false, 0.25, 1e-3);
    EXPECT_TRUE(all_close(eval,
                          reference(x, w.to_vector<double>(), b.to_vector<double>(), false,
                                    new_mean, new_var, 1e-3),
                          1e-10, 1e-10));
  }
}

TEST(BatchNorm, F32StatisticsSurviveALargeOffset) {
  // A one-pass E[x^2] - E[x]^2 in f32 would cancel badly around 1000.
  Tensor x = add(uniform({8, 2, 33, 31}, -1, 1, 7), 1000.0);
  Tensor y = batch_norm(x.to(DType::f32), {}, {}, {}, {}, true);
  EXPECT_TRUE(all_close(y, reference(x, {1, 1}, {0, 0}, true, {}, {}, 1e-5), 1e-4, 2e-4));
}

TEST(BatchNorm, MatchesPyTorchValuesGradientsAndRunningStats) {
  // The running statistics are returned as outputs, so they are compared too.
  const std::string torch_training =
      "(lambda rm, rv: (F.batch_norm(a, rm, rv, d, e, True, 0.3, 1e-4), rm, rv))"
      "(b.detach().clone(), c.detach().clone())";
  auto training = [](const Inputs& in) {
    Tensor rm = in[1].detach().clone(), rv = in[2].detach().clone();
    Tensor y = batch_norm(in[0], rm, rv, in[3], in[4], true, 0.3, 1e-4);
    return std::vector<Tensor>{y, rm, rv};
  };
  for (Shape shape : {Shape{5, 3}, Shape{4, 3, 7}, Shape{3, 3, 5, 6}, Shape{2, 3, 3, 2, 4},
                      Shape{0, 3, 4}, Shape{2, 3, 0}}) {
    SCOPED_TRACE(shape_str(shape));
    Inputs in{uniform(shape, -2, 2, 11), uniform({3}, -1, 1, 12), uniform({3}, 0.5, 2, 13),
              uniform({3}, 0.5, 1.5, 14), uniform({3}, -1, 1, 15)};
    EXPECT_TRUE(matches_torch(torch_training, in, training));
    EXPECT_TRUE(matches_torch("F.batch_norm(a, b.detach(), c.detach(), d, e, False, 0.1, 1e-3)", in,
                              [](const Inputs& x) {
                                return batch_norm(x[0], x[1].detach(), x[2].detach(), x[3], x[4],
                                                  false, 0.1, 1e-3);
                              }));
    EXPECT_TRUE(matches_torch("F.batch_norm(a, None, None, None, None, True)", {in[0]},
                              [](const Inputs& x) { return batch_norm(x[0], {}, {}, {}, {}, true); }));
    Inputs strided{non_contiguous_copy(in[0]), in[1], in[2], in[3], in[4]};
    EXPECT_TRUE(matches_torch(torch_training, strided, training));
  }
  Inputs f32{uniform({4, 3, 8, 8}, -2, 2, 21, DType::f32), uniform({3}, -1, 1, 22, DType::f32),
             uniform({3}, 0.5, 2, 23, DType::f32), uniform({3}, 0.5, 1.5, 24, DType::f32),
             uniform({3}, -1, 1, 25, DType::f32)};
  TorchOptions loose{.rtol = 1e-4, .atol = 1e-5, .grad_rtol = 1e-3, .grad_atol = 1e-4};
  EXPECT_TRUE(matches_torch(torch_training, f32, training, loose));
}

TEST(BatchNorm, ErrorsAsPyTorch) {
  auto bn = [](const Inputs& in) { return batch_norm(in[0], {}, {}, {}, {}, true); };
  EXPECT_TRUE(matches_torch("F.batch_norm(a, None, None, training=True)",
                            {uniform({1, 3})}, bn));
  EXPECT_TRUE(matches_torch("F.batch_norm(a, None, None, training=True)",
                            {uniform({1, 3, 1})}, bn));
  EXPECT_TRUE(matches_torch("F.batch_norm(a, None, None)", {uniform({2, 3})},
                            [](const Inputs& in) { return batch_norm(in[0], {}, {}); }));
  EXPECT_TRUE(matches_torch("F.batch_norm(a, b, b, training=True)",
                            {uniform({2, 4}), uniform({3})}, [](const Inputs& in) {
                              return batch_norm(in[0], in[1].detach(), in[1].detach(), {}, {},
                                                true);
                            }));
  std::string message = error_of([] { batch_norm(uniform({2, 3}), {}, {}, uniform({4}), {}, true); });
  EXPECT_HAS(message, "[batch_norm] weight has shape [4]");
  message = error_of([] { batch_norm(uniform({1, 3, 1}), {}, {}, {}, {}, true); });
  EXPECT_HAS(message, "more than 1 value per channel");
}

TEST(BatchNorm, GradientsAgainstFiniteDifferences) {
  Tensor x = uniform({3, 2, 4}, -2, 2, 31).set_requires_grad();
  Tensor w = uniform({2}, 0.5, 1.5, 32).set_requires_grad();
  Tensor b = uniform({2}, -1, 1, 33).set_requires_grad();
  EXPECT_TRUE(gradcheck(
      [](const std::vector<Tensor>& in) { return batch_norm(in[0], {}, {}, in[1], in[2], true); },
      {x, w, b}));
  Tensor rm = uniform({2}, -1, 1, 34), rv = uniform({2}, 0.5, 2, 35);
  EXPECT_TRUE(gradcheck(
      [&](const std::vector<Tensor>& in) { return batch_norm(in[0], rm, rv, in[1], in[2]); },
      {x, w, b}));
}

TEST(BatchNorm, ModulesMomentumNoneAndBatchNorm3d) {
  nn::BatchNorm3d bn(3, 1e-5, std::nullopt);
  Tensor a = uniform({2, 3, 2, 2, 3}, -1, 1, 41).to(DType::f32);
  Tensor b = uniform({2, 3, 2, 2, 3}, -2, 4, 42).to(DType::f32);
  bn.forward(a);
  bn.forward(b);
  EXPECT_EQ(bn.num_batches_tracked.item<int64_t>(), 2);
  // The cumulative average of the two batches' statistics.
  std::vector<double> ua, ub;
  reference(a, {1, 1, 1}, {0, 0, 0}, true, {}, {}, 1e-5, &ua);
  reference(b, {1, 1, 1}, {0, 0, 0}, true, {}, {}, 1e-5, &ub);
  std::vector<double> expected_var(3);
  for (int c = 0; c < 3; ++c) expected_var[c] = (ua[c] + ub[c]) / 2;
  EXPECT_TRUE(all_close(bn.running_var, expected_var, 1e-5, 1e-5));
  EXPECT_TRUE(all_close(bn.running_mean,
                        mean(stack({mean(a, {0, 2, 3, 4}), mean(b, {0, 2, 3, 4})}), {0}), 1e-5,
                        1e-6));
  EXPECT_HAS(error_of([&] { bn.forward(zeros({2, 3, 4})); }), "[BatchNorm3d] expected [N, C, D");
  EXPECT_TRUE(matches_torch(
      "torch.nn.BatchNorm3d(3, momentum=None).forward(a)", {b},
      [](const Inputs& in) { return nn::BatchNorm3d(3, 1e-5, std::nullopt).forward(in[0]); },
      TorchOptions{.rtol = 1e-4, .atol = 1e-5, .grad_rtol = 1e-3, .grad_atol = 1e-4}));
}

// Group norm by loops in double: each sample's channels in `groups` runs.
std::vector<double> group_reference(const Tensor& x, int64_t groups, const std::vector<double>& w,
                                    const std::vector<double>& b, double eps) {
  const std::vector<double> v = x.contiguous().to_vector<double>();
  const int64_t n = x.size(0), channels = x.size(1);
  const int64_t plane = x.numel() / (n * channels), size = channels / groups * plane;
  std::vector<double> out(v.size());
  for (int64_t start = 0; start < static_cast<int64_t>(v.size()); start += size) {
    double mean = 0, var = 0;
    for (int64_t i = 0; i < size; ++i) mean += v[start + i] / size;
    for (int64_t i = 0; i < size; ++i) var += std::pow(v[start + i] - mean, 2) / size;
    for (int64_t i = 0; i < size; ++i) {
      const int64_t c = (start + i) / plane % channels;
      out[start + i] = (v[start + i] - mean) / std::sqrt(var + eps) * w[c] + b[c];
    }
  }
  return out;
}

TEST(GroupNorm, AgainstLoopsAndPyTorch) {
  Tensor x = uniform({3, 6, 4, 5}, -2, 3, 71);
  Tensor w = uniform({6}, 0.5, 1.5, 72), b = uniform({6}, -1, 1, 73);
  EXPECT_TRUE(all_close(group_norm(x, 3, w, b),
                        group_reference(x, 3, w.to_vector<double>(), b.to_vector<double>(), 1e-5),
                        1e-10, 1e-10));
  for (Shape shape : {Shape{2, 6}, Shape{3, 6, 5}, Shape{2, 6, 3, 4}, Shape{0, 6, 2},
                      Shape{2, 6, 1}}) {
    SCOPED_TRACE(shape_str(shape));
    Inputs in{uniform(shape, -2, 2, 74), uniform({6}, 0.5, 1.5, 75), uniform({6}, -1, 1, 76)};
    EXPECT_TRUE(matches_torch("F.group_norm(a, 2, b, c, 1e-4)", in, [](const Inputs& x) {
      return group_norm(x[0], 2, x[1], x[2], 1e-4);
    }));
    EXPECT_TRUE(matches_torch("F.group_norm(a, 6)", {in[0]},
                              [](const Inputs& x) { return group_norm(x[0], 6); }));
    EXPECT_TRUE(matches_torch("F.group_norm(a, 4)", {in[0]},
                              [](const Inputs& x) { return group_norm(x[0], 4); }));
  }
  EXPECT_TRUE(matches_torch("torch.nn.GroupNorm(2, 6)(a)", {uniform({2, 6, 3}, -1, 1, 77)},
                            [](const Inputs& x) { return nn::GroupNorm(2, 6).forward(x[0]); }));
}

TEST(InstanceNorm, MatchesPyTorchWithAndWithoutRunningStats) {
  const std::string torch_running =
      "(lambda rm, rv: (F.instance_norm(a, rm, rv, d, e, True, 0.3, 1e-4), rm, rv))"
      "(b.detach().clone(), c.detach().clone())";
  auto running = [](const Inputs& in) {
    Tensor rm = in[1].detach().clone(), rv = in[2].detach().clone();
    Tensor y = instance_norm(in[0], rm, rv, in[3], in[4], true, 0.3, 1e-4);
    return std::vector<Tensor>{y, rm, rv};
  };
  for (Shape shape : {Shape{2, 3, 5}, Shape{3, 3, 4, 2}, Shape{2, 3, 1}, Shape{0, 3, 4}}) {
    SCOPED_TRACE(shape_str(shape));
    Inputs in{uniform(shape, -2, 2, 81), uniform({3}, -1, 1, 82), uniform({3}, 0.5, 2, 83),
              uniform({3}, 0.5, 1.5, 84), uniform({3}, -1, 1, 85)};
    EXPECT_TRUE(matches_torch(torch_running, in, running));
    EXPECT_TRUE(matches_torch("F.instance_norm(a)", {in[0]},
                              [](const Inputs& x) { return instance_norm(x[0]); }));
    EXPECT_TRUE(matches_torch(
        "F.instance_norm(a, b.detach(), c.detach(), d, e, False)", in, [](const Inputs& x) {
          return instance_norm(x[0], x[1].detach(), x[2].detach(), x[3], x[4], false);
        }));
  }
  EXPECT_TRUE(matches_torch("torch.nn.InstanceNorm2d(3)(a)", {uniform({3, 4, 5}, -1, 1, 86)},
                            [](const Inputs& x) { return nn::InstanceNorm2d(3).forward(x[0]); }));
  EXPECT_TRUE(matches_torch(
      "torch.nn.InstanceNorm1d(3, affine=True, track_running_stats=True)(a)",
      {uniform({2, 3, 6}, -1, 1, 87)}, [](const Inputs& x) {
        return nn::InstanceNorm1d(3, 1e-5, 0.1, true, true).forward(x[0]);
      }));
}

TESSERA_SBP_CASE("batch_norm_stats", [] { return std::vector<Tensor>{uniform({4, 3, 5}, -1, 1, 51)}; });
TESSERA_SBP_CASE(
    "batch_norm_elemt",
    [] {
      Tensor x = uniform({4, 3, 5}, -1, 1, 52);
      Tensor stats = call1(find_op("batch_norm_stats"), {x});
      return std::vector<Tensor>{x, stats, uniform({3}, 0.5, 1.5, 53), uniform({3}, -1, 1, 54)};
    },
    Attrs{{"training", true}, {"count", int64_t{20}}, {"eps", 1e-5}, {"has_weight", true},
          {"has_bias", true}});
TESSERA_SBP_CASE(
    "batch_norm_backward_reduce",
    [] {
      Tensor x = uniform({4, 3, 5}, -1, 1, 55);
      Tensor stats = call1(find_op("batch_norm_stats"), {x});
      return std::vector<Tensor>{uniform({4, 3, 5}, -1, 1, 56), x, stats};
    },
    Attrs{{"training", true}, {"count", int64_t{20}}, {"eps", 1e-5}});
TESSERA_SBP_CASE(
    "batch_norm_backward_elemt",
    [] {
      Tensor x = uniform({4, 3, 5}, -1, 1, 57);
      Tensor stats = call1(find_op("batch_norm_stats"), {x});
      return std::vector<Tensor>{uniform({4, 3, 5}, -1, 1, 58), x, stats,
                                 uniform({2, 3}, -1, 1, 59), uniform({3}, 0.5, 1.5, 60)};
    },
    Attrs{{"training", true}, {"count", int64_t{20}}, {"eps", 1e-5}, {"has_weight", true}});
TESSERA_SBP_CASE(
    "batch_norm_update_stats",
    [] {
      Tensor stats = call1(find_op("batch_norm_stats"), {uniform({4, 3, 5}, -1, 1, 61)});
      return std::vector<Tensor>{uniform({3}, -1, 1, 62), uniform({3}, 0.5, 2, 63), stats};
    },
    Attrs{{"count", int64_t{20}}, {"momentum", 0.1}});

}  // namespace
}  // namespace tessera::testing
