#include <cmath>
#include <limits>

#include "testing.h"

namespace tessera::testing {
namespace {

// Naive reference: reduces a [2, 3, 4] tensor over `dims` with `f` starting from `init`.
std::vector<double> reduce_ref(const Tensor& x, const std::vector<int64_t>& dims, double init,
                               double (*f)(double, double)) {
  const Shape& s = x.shape();
  std::vector<double> v = x.to_vector<double>();
  auto reduced = [&](int64_t d) { return std::find(dims.begin(), dims.end(), d) != dims.end(); };
  Shape out_shape;
  for (int64_t d = 0; d < 3; ++d) out_shape.push_back(reduced(d) ? 1 : s[d]);
  std::vector<double> out(static_cast<size_t>(numel(out_shape)), init);
  for (int64_t i = 0; i < s[0]; ++i) {
    for (int64_t j = 0; j < s[1]; ++j) {
      for (int64_t k = 0; k < s[2]; ++k) {
        int64_t oi = reduced(0) ? 0 : i, oj = reduced(1) ? 0 : j, ok = reduced(2) ? 0 : k;
        double& slot = out[(oi * out_shape[1] + oj) * out_shape[2] + ok];
        slot = f(slot, v[(i * s[1] + j) * s[2] + k]);
      }
    }
  }
  return out;
}

double plus(double a, double b) { return a + b; }
double bigger(double a, double b) { return std::max(a, b); }
double smaller(double a, double b) { return std::min(a, b); }

const std::vector<std::vector<int64_t>> kDimSets = {{0}, {1}, {2}, {0, 1}, {0, 2}, {1, 2}, {0, 1, 2}};

TEST(Reduce, SumMaxMinOverEveryDimSet) {
  Tensor x = uniform({2, 3, 4}, -2, 2, 1);
  for (const auto& dims : kDimSets) {
    SCOPED_TRACE(shape_str(dims));
    EXPECT_TRUE(all_close(sum(x, dims), reduce_ref(x, dims, 0, plus)));
    EXPECT_TRUE(all_close(max(x, dims), reduce_ref(x, dims, -INFINITY, bigger)));
    EXPECT_TRUE(all_close(min(x, dims), reduce_ref(x, dims, INFINITY, smaller)));
    // keepdim keeps a 1 in every reduced position.
    Tensor kept = sum(x, dims, true);
    EXPECT_EQ(kept.dim(), 3);
    // Strided input (a transposed view) gives the same result.
    Tensor strided = x.permute({2, 1, 0}).contiguous().permute({2, 1, 0});
    EXPECT_TRUE(all_close(sum(strided, dims), reduce_ref(x, dims, 0, plus)));
    EXPECT_TRUE(all_close(max(strided, dims), reduce_ref(x, dims, -INFINITY, bigger)));
  }
}

TEST(Reduce, NegativeDimsKeepdimAndShapes) {
  Tensor x = uniform({2, 3, 4});
  EXPECT_EQ(sum(x, {-1}).shape(), (Shape{2, 3}));
  EXPECT_EQ(sum(x, {-1}, true).shape(), (Shape{2, 3, 1}));
  EXPECT_EQ(sum(x).shape(), Shape{});
  EXPECT_EQ(mean(x, {0, 2}, true).shape(), (Shape{1, 3, 1}));
  EXPECT_THROW(sum(x, {3}), Error);
  EXPECT_THROW(sum(x, {1, -2}), Error);
}

TEST(Reduce, LongRowsAreAccurate) {
  // 1M float ones plus a small value: a naive float accumulator drifts.
  Tensor x = ones({1 << 20}, DType::f32);
  EXPECT_DOUBLE_EQ(sum(x).item<double>(), 1048576.0);
  Tensor y = full({3000000}, 0.1, DType::f32);
  // Within half an f32 ulp (0.03125 at 3e5) of the exact sum.
  EXPECT_NEAR(sum(y).item<double>(), 3000000 * static_cast<double>(0.1f), 0.016);
}

TEST(Reduce, IntegerAndBoolSumsGiveI64) {
  Tensor i = Tensor::from_vector<int32_t>({1, 2, 3, 4}, {2, 2});
  EXPECT_EQ(sum(i).dtype(), DType::i64);
  EXPECT_TRUE(all_close(sum(i, {0}), {4, 6}));
  Tensor b = gt(make({1, -1, 2}), 0);
  EXPECT_EQ(sum(b).item<int64_t>(), 2);
  EXPECT_TRUE(all_close(amax(i, {1}), {2, 4}));
}

TEST(Reduce, MeanVarStdAgainstLoops) {
  Tensor x = uniform({2, 3, 4}, -2, 2, 2);
  for (const auto& dims : kDimSets) {
    SCOPED_TRACE(shape_str(dims));
    std::vector<double> total = reduce_ref(x, dims, 0, plus);
    int64_t count = 1;
    for (int64_t d : dims) count *= x.shape()[d];
    std::vector<double> m = total;
    for (double& v : m) v /= count;
    EXPECT_TRUE(all_close(mean(x, dims), m));
    // Variance: sum of squared deviations by a second naive pass.
    Tensor centered = sub(x, mean(x, dims, true));
    std::vector<double> squares = reduce_ref(mul(centered, centered), dims, 0, plus);
    std::vector<double> unbiased = squares, biased = squares, deviation = squares;
    for (size_t e = 0; e < squares.size(); ++e) {
      unbiased[e] = squares[e] / (count - 1);
      biased[e] = squares[e] / count;
      deviation[e] = std::sqrt(unbiased[e]);
    }
    EXPECT_TRUE(all_close(var(x, dims), unbiased));
    EXPECT_TRUE(all_close(var(x, dims, 0), biased));
    EXPECT_TRUE(all_close(tessera::std(x, dims), deviation));
  }
  EXPECT_THROW(mean(Tensor::from_vector<int64_t>({1, 2}, {2})), Error);
}

TEST(Reduce, LogSumExpIsStable) {
  Tensor x = make({1000, 1000, -INFINITY, 0, 1, 2}, {2, 3});
  std::vector<double> want = {1000 + std::log(2.0), std::log(std::exp(0.0) + std::exp(1.0) + std::exp(2.0))};
  EXPECT_TRUE(all_close(logsumexp(x, {1}), want));
  Tensor all_neg_inf = make({-INFINITY, -INFINITY});
  EXPECT_TRUE(all_close(logsumexp(all_neg_inf, {0}), {-INFINITY}));
  EXPECT_TRUE(all_close(logsumexp(x.to(DType::f32), {1}), want, 1e-6));
}

TEST(Reduce, ArgmaxArgminFirstOccurrence) {
  Tensor x = make({1, 5, 5, 0, -1, 3, 3, -1}, {2, 4});
  EXPECT_TRUE(all_close(argmax(x, 1), {1, 1}));
  EXPECT_TRUE(all_close(argmin(x, 1), {3, 0}));
  EXPECT_TRUE(all_close(argmax(x, 0), {0, 0, 0, 0}));
  EXPECT_EQ(argmax(x).item<int64_t>(), 1);
  EXPECT_EQ(argmin(x).item<int64_t>(), 4);
  EXPECT_EQ(argmax(x, 1, true).shape(), (Shape{2, 1}));
  EXPECT_EQ(argmax(x, 1).dtype(), DType::i64);
  Tensor with_nan = make({1, NAN, 3});
  EXPECT_EQ(argmax(with_nan).item<int64_t>(), 1);
  EXPECT_THROW(argmax(zeros({0})), Error);
  EXPECT_THROW(amax(zeros({2, 0}), {1}), Error);
}

TEST(Reduce, Gradients) {
  Tensor x = uniform({2, 3, 4}, -2, 2, 3).set_requires_grad();
  for (const auto& dims : kDimSets) {
    SCOPED_TRACE(shape_str(dims));
    for (bool keepdim : {false, true}) {
      auto d = dims;
      EXPECT_TRUE(gradcheck([d, keepdim](const std::vector<Tensor>& in) { return sum(in[0], d, keepdim); }, {x}));
      EXPECT_TRUE(gradcheck([d, keepdim](const std::vector<Tensor>& in) { return mean(in[0], d, keepdim); }, {x}));
      EXPECT_TRUE(gradcheck([d, keepdim](const std::vector<Tensor>& in) { return max(in[0], d, keepdim); }, {x}));
      EXPECT_TRUE(gradcheck([d, keepdim](const std::vector<Tensor>& in) { return min(in[0], d, keepdim); }, {x}));
      EXPECT_TRUE(gradcheck([d, keepdim](const std::vector<Tensor>& in) { return var(in[0], d, 1, keepdim); }, {x}));
      EXPECT_TRUE(gradcheck([d, keepdim](const std::vector<Tensor>& in) { return tessera::std(in[0], d, 1, keepdim); }, {x}));
      EXPECT_TRUE(gradcheck([d, keepdim](const std::vector<Tensor>& in) { return logsumexp(in[0], d, keepdim); }, {x}));
    }
  }
  EXPECT_TRUE(gradgradcheck([](const std::vector<Tensor>& in) { return var(in[0], {1}); }, {x}));
  EXPECT_TRUE(gradgradcheck([](const std::vector<Tensor>& in) { return logsumexp(in[0], {2}); }, {x}));
}

TEST(Reduce, MaxGradientSharedAmongTies) {
  Tensor x = make({2, 2, 1}).set_requires_grad();
  max(x).backward();
  EXPECT_TRUE(all_close(x.grad(), {0.5, 0.5, 0}));
}

TEST(Reduce, SumToInvertsBroadcast) {
  Tensor g = uniform({2, 3, 4});
  Tensor reduced = sum_to(g, {3, 1});
  std::vector<double> want(3, 0.0);
  std::vector<double> v = g.to_vector<double>();
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j)
      for (int k = 0; k < 4; ++k) want[j] += v[(i * 3 + j) * 4 + k];
  EXPECT_EQ(reduced.shape(), (Shape{3, 1}));
  EXPECT_TRUE(all_close(reduced, want));
  EXPECT_THROW(sum_to(g, {5}), Error);
}

Attrs dims_attrs(std::vector<int64_t> dims, bool keepdim) {
  return Attrs{{"dims", dims}, {"keepdim", keepdim}};
}

TESSERA_SBP_CASE("sum", [] { return std::vector<Tensor>{uniform({5, 4, 3})}; }, dims_attrs({1}, false));
TESSERA_SBP_CASE("sum", [] { return std::vector<Tensor>{uniform({5, 4, 3})}; }, dims_attrs({0, 2}, true));
TESSERA_SBP_CASE("max", [] { return std::vector<Tensor>{uniform({5, 4, 3})}; }, dims_attrs({1}, false));
TESSERA_SBP_CASE("min", [] { return std::vector<Tensor>{uniform({5, 4, 3})}; }, dims_attrs({0, 2}, true));
TESSERA_SBP_CASE("argmax", [] { return std::vector<Tensor>{uniform({5, 4, 3})}; }, dims_attrs({1}, false));
TESSERA_SBP_CASE("argmin", [] { return std::vector<Tensor>{uniform({5, 4, 3})}; }, dims_attrs({2}, true));

TEST(Logsumexp, InfiniteEntriesFollowPyTorch) {
  // PyTorch: logsumexp([inf, 1]) = inf, ([inf, -inf]) = inf, ([nan, inf]) = nan,
  // ([-inf, -inf]) = -inf.
  const double inf = std::numeric_limits<double>::infinity();
  EXPECT_TRUE(all_close(logsumexp(make({inf, 1})), {inf}));
  EXPECT_TRUE(all_close(logsumexp(make({inf, -inf})), {inf}));
  EXPECT_TRUE(all_close(logsumexp(make({std::nan(""), inf})), {std::nan("")}));
  EXPECT_TRUE(all_close(logsumexp(make({-inf, -inf})), {-inf}));
}

TEST(ZeroDimReductions, ExplicitDimReturnsTheValue) {
  // PyTorch: for a 0-d x, x.sum(0), x.amax(-1), x.argmax(0) ... are 0-d:
  // the value itself (index 0 for argmax / argmin, nan for var).
  Tensor x = make({2.5});
  ASSERT_EQ(x.dim(), 0);
  for (int64_t dim : {0, -1}) {
    for (bool keepdim : {false, true}) {
      EXPECT_EQ(sum(x, {dim}, keepdim).shape(), Shape{});
      EXPECT_TRUE(all_close(sum(x, {dim}, keepdim), {2.5}));
      EXPECT_TRUE(all_close(mean(x, {dim}, keepdim), {2.5}));
      EXPECT_TRUE(all_close(amax(x, {dim}, keepdim), {2.5}));
      EXPECT_TRUE(all_close(amin(x, {dim}, keepdim), {2.5}));
      EXPECT_TRUE(all_close(logsumexp(x, {dim}, keepdim), {2.5}));
      EXPECT_TRUE(all_close(var(x, {dim}, 1, keepdim), {std::nan("")}));
      EXPECT_EQ(argmax(x, dim, keepdim).item<int64_t>(), 0);
      EXPECT_EQ(argmin(x, dim, keepdim).item<int64_t>(), 0);
      EXPECT_EQ(argmax(x, dim, keepdim).shape(), Shape{});
    }
  }
  EXPECT_HAS(error_of([&] { sum(x, {1}); }), "[sum] dim 1 is out of range");
  Tensor leaf = make({2.5}).set_requires_grad(true);
  amax(leaf, {0}).backward();
  EXPECT_TRUE(all_close(leaf.grad(), {1.0}));
}

}  // namespace
}  // namespace tessera::testing
