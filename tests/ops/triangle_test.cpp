#include "testing.h"

namespace tessera::testing {
namespace {

// Keeps element (r, c) of each trailing matrix where keep(c - r) holds.
std::vector<double> ref_triangle(const Tensor& x, bool lower, int64_t diagonal) {
  const int64_t rows = x.shape()[x.dim() - 2], cols = x.shape()[x.dim() - 1];
  std::vector<double> v = x.to_vector<double>();
  for (size_t p = 0; p < v.size(); ++p) {
    int64_t c = static_cast<int64_t>(p) % cols, r = static_cast<int64_t>(p) / cols % rows;
    bool keep = lower ? c - r <= diagonal : c - r >= diagonal;
    if (!keep) v[p] = 0;
  }
  return v;
}

TEST(Triangle, HandValues) {
  Tensor x = make({1, 2, 3, 4, 5, 6, 7, 8, 9}, {3, 3});
  EXPECT_TRUE(all_close(tril(x), {1, 0, 0, 4, 5, 0, 7, 8, 9}));
  EXPECT_TRUE(all_close(triu(x), {1, 2, 3, 0, 5, 6, 0, 0, 9}));
  EXPECT_TRUE(all_close(tril(x, -1), {0, 0, 0, 4, 0, 0, 7, 8, 0}));
  EXPECT_TRUE(all_close(triu(x, 1), {0, 2, 3, 0, 0, 6, 0, 0, 0}));
}

TEST(Triangle, AgainstLoopsWithBatchStridesAndDtypes) {
  Tensor x = uniform({2, 3, 4, 5}, -1, 1, 1);
  Tensor strided = uniform({5, 4, 3, 2}, -1, 1, 2).permute({3, 2, 1, 0});
  ASSERT_FALSE(strided.is_contiguous());
  for (int64_t diagonal : {-5, -4, -2, -1, 0, 1, 3, 4, 5, 100, -100}) {
    SCOPED_TRACE(diagonal);
    EXPECT_TRUE(all_close(tril(x, diagonal), ref_triangle(x, true, diagonal), 0, 0));
    EXPECT_TRUE(all_close(triu(x, diagonal), ref_triangle(x, false, diagonal), 0, 0));
    EXPECT_TRUE(all_close(tril(strided, diagonal), ref_triangle(strided, true, diagonal), 0, 0));
    EXPECT_TRUE(all_close(triu(strided, diagonal), ref_triangle(strided, false, diagonal), 0, 0));
  }
  Tensor x32 = uniform({300, 200}, -1, 1, 3, DType::f32);  // large: parallel rows
  EXPECT_TRUE(all_close(triu(x32, 7), ref_triangle(x32, false, 7), 0, 0));
  Tensor xi = Tensor::from_vector<int64_t>({1, 2, 3, 4}, {2, 2});
  EXPECT_TRUE(all_close(tril(xi), {1, 0, 3, 4}));
  EXPECT_EQ(tril(xi).dtype(), DType::i64);
  Tensor flags = ones({2, 3}, DType::boolean);
  EXPECT_TRUE(all_close(triu(flags, 1), {0, 1, 1, 0, 0, 1}));
  EXPECT_EQ(tril(zeros({0, 3})).shape(), (Shape{0, 3}));
}

TEST(Triangle, GradientsAndErrors) {
  for (int64_t diagonal : {-1, 0, 2}) {
    auto lower = [diagonal](const std::vector<Tensor>& in) { return tril(in[0], diagonal); };
    auto upper = [diagonal](const std::vector<Tensor>& in) {
      Tensor y = triu(in[0], diagonal);
      return mul(y, y);
    };
    EXPECT_TRUE(gradcheck(lower, {uniform({2, 3, 4}, -1, 1, 4).set_requires_grad()}));
    EXPECT_TRUE(gradgradcheck(upper, {uniform({3, 3}, -1, 1, 5).set_requires_grad()}));
  }
  try {
    tril(zeros({4}));
    FAIL() << "expected an error";
  } catch (const Error& error) {
    std::string message = error.what();
    EXPECT_NE(message.find("[tril]"), std::string::npos) << message;
    EXPECT_NE(message.find("[4]"), std::string::npos) << message;
  }
  EXPECT_THROW(triu(Tensor::scalar(1.0)), Error);
}

// ---- SBP ---------------------------------------------------------------------

TESSERA_SBP_CASE(
    "tril",
    [] {
      return std::vector<Tensor>{uniform({5, 7}, -1, 1, 1)};
    },
    Attrs{{"diagonal", int64_t{0}}});
TESSERA_SBP_CASE(
    "tril",
    [] {
      return std::vector<Tensor>{uniform({3, 5, 4}, -1, 1, 2)};
    },
    Attrs{{"diagonal", int64_t{-2}}});
TESSERA_SBP_CASE(
    "triu",
    [] {
      return std::vector<Tensor>{uniform({7, 5}, -1, 1, 3)};
    },
    Attrs{{"diagonal", int64_t{1}}});
TESSERA_SBP_CASE(
    "triu",
    [] {
      return std::vector<Tensor>{uniform({2, 3, 5, 6}, -1, 1, 4)};
    },
    Attrs{{"diagonal", int64_t{-1}}});

}  // namespace
}  // namespace tessera::testing
