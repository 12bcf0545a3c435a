#include "testing.h"

namespace tessera::testing {
namespace {

// torch.matmul written out with loops over logical indices.
std::vector<double> ref_matmul(const Tensor& a, const Tensor& b, Shape* out_shape = nullptr) {
  Shape sa = a.shape(), sb = b.shape();
  if (sa.size() == 1) sa.insert(sa.begin(), 1);
  if (sb.size() == 1) sb.push_back(1);
  std::vector<double> va = a.to_vector<double>(), vb = b.to_vector<double>();
  const int64_t m = sa[sa.size() - 2], k = sa.back(), n = sb.back();
  Shape ba(sa.begin(), sa.end() - 2), bb(sb.begin(), sb.end() - 2);
  size_t nd = std::max(ba.size(), bb.size());
  ba.insert(ba.begin(), nd - ba.size(), 1);
  bb.insert(bb.begin(), nd - bb.size(), 1);
  Shape batch(nd);
  for (size_t d = 0; d < nd; ++d) batch[d] = std::max(ba[d], bb[d]);
  std::vector<double> out;
  for (int64_t flat = 0; flat < numel(batch); ++flat) {
    int64_t rest = flat, ia = 0, ib = 0, mul_a = 1, mul_b = 1;
    for (size_t d = nd; d-- > 0;) {
      int64_t index = rest % batch[d];
      rest /= batch[d];
      ia += (ba[d] == 1 ? 0 : index) * mul_a;
      ib += (bb[d] == 1 ? 0 : index) * mul_b;
      mul_a *= ba[d];
      mul_b *= bb[d];
    }
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        double total = 0;
        for (int64_t p = 0; p < k; ++p) {
          total += va[(ia * m + i) * k + p] * vb[(ib * k + p) * n + j];
        }
        out.push_back(total);
      }
    }
  }
  if (out_shape) {
    *out_shape = batch;
    if (a.dim() > 1) out_shape->push_back(m);
    if (b.dim() > 1) out_shape->push_back(n);
  }
  return out;
}

void expect_matches(const Tensor& a, const Tensor& b, double tol) {
  Shape want_shape;
  std::vector<double> want = ref_matmul(a, b, &want_shape);
  Tensor out = matmul(a, b);
  EXPECT_EQ(out.shape(), want_shape) << shape_str(a.shape()) << " @ " << shape_str(b.shape());
  EXPECT_TRUE(all_close(out, want, tol, tol)) << shape_str(a.shape()) << " @ "
                                               << shape_str(b.shape());
}

const std::pair<Shape, Shape> kShapes[] = {
    {{3, 4}, {4, 5}},         {{7}, {7}},           {{4}, {4, 3}},
    {{3, 4}, {4}},            {{2, 3, 4}, {4, 5}},  {{4, 5}, {2, 5, 3}},
    {{2, 1, 3, 4}, {5, 4, 2}}, {{4}, {2, 4, 3}},     {{2, 3, 4}, {4}},
    {{1, 1}, {1, 1}},         {{3, 1}, {1, 4}},     {{33, 65}, {65, 17}},
};

TEST(Matmul, ForwardMatchesLoopsF32AndF64) {
  for (const auto& [shape_a, shape_b] : kShapes) {
    Tensor a = uniform(shape_a, -1, 1, 1), b = uniform(shape_b, -1, 1, 2);
    expect_matches(a, b, 1e-12);
    Tensor a32 = a.to(DType::f32), b32 = b.to(DType::f32);
    EXPECT_EQ(matmul(a32, b32).dtype(), DType::f32);
    expect_matches(a32, b32, 1e-5);
  }
}

TEST(Matmul, DotProductIsZeroDim) {
  Tensor out = matmul(make({1, 2, 3}), make({4, 5, 6}));
  EXPECT_EQ(out.dim(), 0);
  EXPECT_DOUBLE_EQ(out.item<double>(), 32.0);
}

TEST(Matmul, TransposedAndStridedOperands) {
  Tensor base_a = uniform({5, 6}, -1, 1, 3), base_b = uniform({7, 6}, -1, 1, 4);
  // Transposed views go to BLAS as transposes; slices with a step are copied.
  Tensor at = base_a.t(), bt = base_b.t();
  EXPECT_FALSE(bt.is_contiguous());
  expect_matches(base_a, bt, 1e-12);
  expect_matches(at, base_a, 1e-12);
  expect_matches(base_a.slice(1, 0, 6, 2), base_b.slice(0, 0, 6, 2), 1e-12);
  expect_matches(base_a.slice(0, 1, 4), bt.slice(1, 2, 7), 1e-12);
  // Batched transposes and a permuted batch that cannot be folded.
  Tensor c = uniform({3, 4, 5}, -1, 1, 5);
  expect_matches(c.transpose(1, 2), uniform({3, 4, 2}, -1, 1, 6), 1e-12);
  expect_matches(c.permute({1, 0, 2}), uniform({5, 3}, -1, 1, 7), 1e-12);
  expect_matches(c.transpose(1, 2), uniform({4, 3}, -1, 1, 8).t().contiguous().t(), 1e-12);
  // Broadcast (stride-0) operands.
  expect_matches(uniform({1, 4}, -1, 1, 9).expand({3, 4}), uniform({4, 2}, -1, 1, 10), 1e-12);
  expect_matches(uniform({4, 5}, -1, 1, 11).expand({3, 4, 5}), uniform({5, 2}, -1, 1, 12), 1e-12);
  // f32 transposed.
  expect_matches(base_a.to(DType::f32), bt.to(DType::f32).t().t().t().contiguous().t(), 1e-5);
}

// Products above gemm's split threshold are cut into one block per thread
// along the longer output dim; every transpose combination and both split
// directions (wide and tall outputs, sizes not multiples of the block
// alignment) must match the loops, on 1, 2 and 3 threads.
TEST(Matmul, LargeProductsSplitOverThreads) {
  const int saved = num_threads();
  for (int threads : {1, 2, 3}) {
    set_num_threads(threads);
    for (auto [m, n] : {std::pair<int64_t, int64_t>{67, 301}, {301, 67}}) {
      const int64_t k = 130;
      Tensor a = uniform({m, k}, -1, 1, 21), b = uniform({k, n}, -1, 1, 22);
      Tensor at = a.t().contiguous().t(), bt = b.t().contiguous().t();
      for (const Tensor& lhs : {a, at})
        for (const Tensor& rhs : {b, bt}) {
          expect_matches(lhs, rhs, 1e-11);
          expect_matches(lhs.to(DType::f32), rhs.to(DType::f32), 1e-4);
        }
    }
    // A batch of products, one per thread.
    expect_matches(uniform({6, 40, 50}, -1, 1, 23), uniform({6, 50, 30}, -1, 1, 24), 1e-12);
  }
  set_num_threads(saved);
}

TEST(Matmul, EmptyDims) {
  Tensor zero_k = matmul(zeros({3, 0}), zeros({0, 4}));
  EXPECT_EQ(zero_k.shape(), (Shape{3, 4}));
  EXPECT_TRUE(all_close(zero_k, std::vector<double>(12, 0.0)));
  EXPECT_EQ(matmul(zeros({0, 3}), zeros({3, 4})).shape(), (Shape{0, 4}));
  EXPECT_EQ(matmul(zeros({2, 0, 3}), zeros({3, 4})).shape(), (Shape{2, 0, 4}));
  EXPECT_EQ(matmul(zeros({0}), zeros({0})).item<float>(), 0.0f);
}

TEST(Matmul, IntegersAndPromotion) {
  Tensor a = Tensor::from_vector<int64_t>({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor b = Tensor::from_vector<int64_t>({1, -1, 2, 0, 3, 1}, {3, 2});
  Tensor out = matmul(a, b);
  EXPECT_EQ(out.dtype(), DType::i64);
  EXPECT_TRUE(all_close(out, {14, 2, 32, 2}));
  EXPECT_TRUE(all_close(matmul(a.t(), Tensor::from_vector<int64_t>({1, 1}, {2})), {5, 7, 9}));
  Tensor i32 = a.to(DType::i32);
  EXPECT_EQ(matmul(i32, b.to(DType::i32)).dtype(), DType::i32);
  EXPECT_TRUE(all_close(matmul(i32, b.to(DType::i32)), {14, 2, 32, 2}));
  Tensor mixed = matmul(a, make({1, 0, 0, 1, 1, 1}, {3, 2}, DType::f32));
  EXPECT_EQ(mixed.dtype(), DType::f32);
  EXPECT_TRUE(all_close(mixed, {4, 5, 10, 11}));
}

TEST(Matmul, GradientsMatchFiniteDifferences) {
  for (const auto& [shape_a, shape_b] : kShapes) {
    if (numel(shape_a) > 200 || numel(shape_b) > 200) continue;
    SCOPED_TRACE(shape_str(shape_a) + " @ " + shape_str(shape_b));
    Tensor a = uniform(shape_a, -1, 1, 1).set_requires_grad();
    Tensor b = uniform(shape_b, -1, 1, 2).set_requires_grad();
    auto fn = [](const std::vector<Tensor>& in) { return matmul(in[0], in[1]); };
    EXPECT_TRUE(gradcheck(fn, {a, b}));
    EXPECT_TRUE(gradgradcheck(fn, {a, b}));
  }
  // Through a transposed view, and with only one operand requiring grad.
  auto transposed = [](const std::vector<Tensor>& in) { return matmul(in[0].t(), in[1]); };
  EXPECT_TRUE(gradcheck(transposed, {uniform({3, 2}).set_requires_grad(),
                                     uniform({3, 4}).set_requires_grad()}));
  EXPECT_TRUE(gradcheck([](const std::vector<Tensor>& in) { return matmul(in[0], in[1]); },
                        {uniform({2, 3}), uniform({3, 2}).set_requires_grad()}));
}

TEST(Matmul, BackwardValues) {
  Tensor a = uniform({2, 3, 4}, -1, 1, 1).set_requires_grad();
  Tensor b = uniform({4, 5}, -1, 1, 2).set_requires_grad();
  sum(matmul(a, b)).backward();
  // d sum(a b)/d a[i, j] = sum_n b[j, n]; d/d b[j, n] = sum over batch and rows of a[., j].
  std::vector<double> vb = b.to_vector<double>(), va = a.to_vector<double>();
  std::vector<double> want_a, want_b(20, 0.0);
  for (int r = 0; r < 6; ++r) {
    for (int j = 0; j < 4; ++j) {
      double row_sum = 0;
      for (int n = 0; n < 5; ++n) row_sum += vb[j * 5 + n];
      want_a.push_back(row_sum);
      for (int n = 0; n < 5; ++n) want_b[j * 5 + n] += va[r * 4 + j];
    }
  }
  EXPECT_TRUE(all_close(a.grad(), want_a, 1e-12, 1e-12));
  EXPECT_TRUE(all_close(b.grad(), want_b, 1e-12, 1e-12));
  EXPECT_EQ(b.grad().shape(), (Shape{4, 5}));
}

TEST(Matmul, ContiguousAndTransposedInputsAreNotCopied) {
  NoGradGuard no_grad;
  Tensor a = uniform({64, 32}, -1, 1, 1, DType::f32);
  Tensor b = uniform({48, 32}, -1, 1, 2, DType::f32).t();
  Tensor batched = uniform({3, 64, 32}, -1, 1, 3, DType::f32);
  auto& allocator = CpuAllocator::instance();
  for (auto [lhs, rhs, out_bytes] :
       {std::tuple{a, b, 64 * 48 * 4}, std::tuple{a.t(), a, 32 * 32 * 4},
        std::tuple{batched, b, 3 * 64 * 48 * 4}}) {
    allocator.reset_peak();
    int64_t before = allocator.stats().current_bytes;
    Tensor out = matmul(lhs, rhs);
    EXPECT_LE(allocator.stats().peak_bytes - before,
              static_cast<int64_t>(CpuAllocator::round_size(out_bytes)));
  }
}

TEST(Matmul, ErrorsNameOpAndShapes) {
  try {
    matmul(zeros({32, 64}), zeros({128, 10}));
    FAIL() << "expected an error";
  } catch (const Error& error) {
    std::string message = error.what();
    EXPECT_NE(message.find("[matmul]"), std::string::npos) << message;
    EXPECT_NE(message.find("[32, 64]"), std::string::npos) << message;
    EXPECT_NE(message.find("[128, 10]"), std::string::npos) << message;
    EXPECT_NE(message.find("a.shape[-1] must equal b.shape[-2]"), std::string::npos) << message;
  }
  try {
    matmul(zeros({2, 3, 4}), zeros({5, 4, 2}));
    FAIL() << "expected an error";
  } catch (const Error& error) {
    std::string message = error.what();
    EXPECT_NE(message.find("[matmul] batch dims"), std::string::npos) << message;
    EXPECT_NE(message.find("[5, 4, 2]"), std::string::npos) << message;
  }
  EXPECT_THROW(matmul(zeros({}), zeros({3})), Error);
  EXPECT_THROW(matmul(zeros({3}, DType::boolean), zeros({3}, DType::boolean)), Error);
}

TEST(Matmul, SixteenBitOperandsMultiplyInF32) {
  // bf16 has no kernel of its own: the product is the f32 one, rounded once.
  Tensor a = uniform({3, 4}, -1, 1, 1, DType::f32).to(DType::bf16);
  Tensor b = uniform({4, 2}, -1, 1, 2, DType::f32).to(DType::bf16);
  Tensor product = matmul(a, b);
  EXPECT_EQ(product.dtype(), DType::bf16);
  Tensor exact = matmul(a.to(DType::f32), b.to(DType::f32)).to(DType::bf16);
  EXPECT_EQ(product.to(DType::f32).to_vector<float>(), exact.to(DType::f32).to_vector<float>());
}

TESSERA_SBP_CASE("matmul", [] {
  return std::vector<Tensor>{uniform({5, 7}, -1, 1, 1), uniform({7, 4}, -1, 1, 2)};
});
TESSERA_SBP_CASE("matmul", [] {
  return std::vector<Tensor>{uniform({3, 1, 5, 4}, -1, 1, 1), uniform({4, 4, 2}, -1, 1, 2)};
});
TESSERA_SBP_CASE("matmul", [] {
  return std::vector<Tensor>{uniform({4, 5, 3}, -1, 1, 1), uniform({3, 5}, -1, 1, 2)};
});
TESSERA_SBP_CASE("matmul", [] {
  return std::vector<Tensor>{Tensor::from_vector<int64_t>({1, 2, 3, 4, 5, 6}, {3, 2}),
                             Tensor::from_vector<int64_t>({1, -1, 2, 0, 3, 1}, {2, 3})};
});

}  // namespace
}  // namespace tessera::testing
