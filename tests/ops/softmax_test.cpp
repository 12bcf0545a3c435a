#include <cmath>
#include <limits>

#include "testing.h"

namespace tessera::testing {
namespace {

// Softmax (or log-softmax) of x along dim by direct loops in double.
std::vector<double> reference(const Tensor& x, int64_t dim, bool log_form) {
  std::vector<double> v = x.to_vector<double>();
  const Shape& shape = x.shape();
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < dim; ++d) outer *= shape[d];
  for (int64_t d = dim + 1; d < x.dim(); ++d) inner *= shape[d];
  const int64_t size = shape[dim];
  std::vector<double> out(v.size());
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i = 0; i < inner; ++i) {
      auto at = [&](int64_t k) { return (o * size + k) * inner + i; };
      double m = -INFINITY;
      for (int64_t k = 0; k < size; ++k) m = std::max(m, v[at(k)]);
      double total = 0;
      for (int64_t k = 0; k < size; ++k) total += std::exp(v[at(k)] - m);
      for (int64_t k = 0; k < size; ++k) {
        out[at(k)] = log_form ? v[at(k)] - m - std::log(total) : std::exp(v[at(k)] - m) / total;
      }
    }
  }
  return out;
}

TEST(Softmax, EveryDimAgainstLoopsF64AndF32) {
  Tensor x = uniform({3, 4, 5}, -4, 4, 1);
  for (int64_t dim = 0; dim < 3; ++dim) {
    SCOPED_TRACE(dim);
    EXPECT_TRUE(all_close(softmax(x, dim), reference(x, dim, false), 1e-12, 1e-14));
    EXPECT_TRUE(all_close(log_softmax(x, dim), reference(x, dim, true), 1e-12, 1e-12));
    Tensor x32 = x.to(DType::f32);
    EXPECT_EQ(softmax(x32, dim).dtype(), DType::f32);
    EXPECT_TRUE(all_close(softmax(x32, dim), reference(x32, dim, false), 2e-6, 1e-7));
    EXPECT_TRUE(all_close(log_softmax(x32, dim), reference(x32, dim, true), 2e-6, 2e-6));
  }
  EXPECT_TRUE(all_close(softmax(x, -1), reference(x, 2, false), 1e-12, 1e-14));
}

TEST(Softmax, LongRowsExerciseVectorBodyTailAndBlocks) {
  // 1037 leaves a vector tail; 2600 spans several summation blocks.
  for (int64_t n : {1, 7, 16, 1037, 2600}) {
    SCOPED_TRACE(n);
    Tensor x = uniform({3, n}, -20, 20, static_cast<uint64_t>(n));
    Tensor x32 = x.to(DType::f32);
    EXPECT_TRUE(all_close(softmax(x32, 1), reference(x32, 1, false), 3e-6, 1e-9));
    EXPECT_TRUE(all_close(log_softmax(x32, 1), reference(x32, 1, true), 3e-6, 3e-5));
    EXPECT_TRUE(all_close(sum(softmax(x32, 1), {1}), std::vector<double>(3, 1.0), 1e-5, 0));
  }
  // A non-last dim with more than one column block.
  Tensor y = uniform({2, 9, 150}, -5, 5, 3).to(DType::f32);
  EXPECT_TRUE(all_close(softmax(y, 1), reference(y, 1, false), 3e-6, 1e-8));
  EXPECT_TRUE(all_close(log_softmax(y, 1), reference(y, 1, true), 3e-6, 3e-6));
}

TEST(Softmax, StridedInputs) {
  Tensor base = uniform({6, 10}, -3, 3, 4);
  Tensor transposed = base.t();  // [10, 6], dim 1 strided
  EXPECT_FALSE(transposed.is_contiguous());
  EXPECT_TRUE(all_close(softmax(transposed, 1), reference(transposed.contiguous(), 1, false), 1e-12,
                        1e-14));
  EXPECT_TRUE(all_close(log_softmax(transposed, 0), reference(transposed.contiguous(), 0, true),
                        1e-12, 1e-12));
  // Rows of unit stride but a row stride larger than the row.
  Tensor narrowed = base.slice(1, 2, 9).to(DType::f32);
  Tensor stepped = base.to(DType::f32).slice(1, 2, 9);
  EXPECT_FALSE(stepped.is_contiguous());
  EXPECT_TRUE(all_close(softmax(stepped, 1), reference(narrowed, 1, false), 2e-6, 1e-7));
  EXPECT_TRUE(all_close(log_softmax(stepped, -1), reference(narrowed, 1, true), 2e-6, 2e-6));
  // Every other row, and a broadcast (stride 0) batch.
  Tensor rows = base.slice(0, 0, 6, 2);
  EXPECT_TRUE(all_close(softmax(rows, 1), reference(rows.contiguous(), 1, false), 1e-12, 1e-14));
  Tensor expanded = base.slice(0, 0, 1).expand({4, 10});
  EXPECT_TRUE(
      all_close(softmax(expanded, 1), reference(expanded.contiguous(), 1, false), 1e-12, 1e-14));
}

TEST(Softmax, SpecialValues) {
  const double inf = std::numeric_limits<double>::infinity();
  for (DType dtype : {DType::f32, DType::f64}) {
    SCOPED_TRACE(dtype_name(dtype));
    // Masked (-inf) entries get exactly 0; huge logits do not overflow.
    Tensor x = make({0.0, -inf, 0.0, 1000.0, 1000.0, -inf}, {2, 3}, dtype);
    EXPECT_TRUE(all_close(softmax(x, 1), {0.5, 0.0, 0.5, 0.5, 0.5, 0.0}, 1e-6, 0));
    EXPECT_TRUE(all_close(
        log_softmax(x, 1),
        {-std::log(2.0), -inf, -std::log(2.0), -std::log(2.0), -std::log(2.0), -inf}, 1e-6, 0));
    // A NaN or an all -inf row is NaN throughout, as in PyTorch.
    Tensor bad = make({1.0, NAN, 2.0, -inf, -inf, -inf}, {2, 3}, dtype);
    EXPECT_TRUE(all_close(softmax(bad, 1), std::vector<double>(6, NAN)));
    EXPECT_TRUE(all_close(log_softmax(bad, 1), std::vector<double>(6, NAN)));
  }
}

TEST(Softmax, ScalarsAndEmptyTensors) {
  Tensor s = Tensor::scalar(3.5, DType::f64);
  EXPECT_TRUE(all_close(softmax(s, 0), {1.0}));
  EXPECT_TRUE(all_close(log_softmax(s, -1), {0.0}));
  EXPECT_EQ(softmax(s, 0).dim(), 0);
  EXPECT_EQ(softmax(zeros({0, 5}), 1).shape(), (Shape{0, 5}));
  EXPECT_EQ(log_softmax(zeros({3, 0}), 1).shape(), (Shape{3, 0}));
  EXPECT_EQ(softmax(zeros({2, 0, 3}), 2).shape(), (Shape{2, 0, 3}));
}

TEST(Softmax, Gradients) {
  Tensor x = uniform({3, 4}, -2, 2, 7).set_requires_grad();
  for (int64_t dim : {0, 1}) {
    SCOPED_TRACE(dim);
    auto f = [dim](const std::vector<Tensor>& in) { return softmax(in[0], dim); };
    auto g = [dim](const std::vector<Tensor>& in) { return log_softmax(in[0], dim); };
    EXPECT_TRUE(gradcheck(f, {x}));
    EXPECT_TRUE(gradcheck(g, {x}));
    EXPECT_TRUE(gradgradcheck(f, {x}));
    EXPECT_TRUE(gradgradcheck(g, {x}));
  }
  // Middle dim of a 3-d tensor, through a transposed (strided) input.
  Tensor y = uniform({3, 2, 4}, -2, 2, 8).set_requires_grad();
  EXPECT_TRUE(gradcheck(
      [](const std::vector<Tensor>& in) { return softmax(in[0].transpose(0, 2), 1); }, {y}));
  EXPECT_TRUE(gradcheck([](const std::vector<Tensor>& in) { return log_softmax(in[0], 1); }, {y}));
}

TEST(Softmax, GradientValuesAgainstHandFormula) {
  // d(softmax_i)/dx_j = s_i (delta_ij - s_j); with upstream g = e_0 the
  // gradient is s_0 (e_0 - s).
  Tensor x = make({0.2, -0.4, 1.1}).set_requires_grad();
  Tensor s = softmax(x, 0);
  s.backward(make({1.0, 0.0, 0.0}));
  std::vector<double> p = reference(x.detach(), 0, false);
  EXPECT_TRUE(all_close(x.grad(), {p[0] * (1 - p[0]), -p[0] * p[1], -p[0] * p[2]}, 1e-12, 1e-14));
}

TEST(Softmax, Errors) {
  Tensor i = Tensor::from_vector<int64_t>({1, 2, 3}, {3});
  try {
    softmax(i, 0);
    FAIL() << "expected an error";
  } catch (const Error& error) {
    std::string message = error.what();
    EXPECT_NE(message.find("[softmax]"), std::string::npos) << message;
    EXPECT_NE(message.find("i64"), std::string::npos) << message;
  }
  try {
    log_softmax(zeros({2, 3}), 2);
    FAIL() << "expected an error";
  } catch (const Error& error) {
    std::string message = error.what();
    EXPECT_NE(message.find("[log_softmax]"), std::string::npos) << message;
    EXPECT_NE(message.find("dim 2"), std::string::npos) << message;
  }
}

TESSERA_SBP_CASE(
    "softmax",
    [] {
      return std::vector<Tensor>{uniform({5, 7}, -2, 2, 3)};
    },
    Attrs{{"dim", int64_t{1}}});
TESSERA_SBP_CASE(
    "softmax",
    [] {
      return std::vector<Tensor>{uniform({4, 5, 3}, -2, 2, 4)};
    },
    Attrs{{"dim", int64_t{1}}});
TESSERA_SBP_CASE(
    "log_softmax",
    [] {
      return std::vector<Tensor>{uniform({5, 7}, -2, 2, 5)};
    },
    Attrs{{"dim", int64_t{0}}});
TESSERA_SBP_CASE(
    "log_softmax",
    [] {
      return std::vector<Tensor>{uniform({3, 4, 5}, -2, 2, 6)};
    },
    Attrs{{"dim", int64_t{2}}});

}  // namespace
}  // namespace tessera::testing
