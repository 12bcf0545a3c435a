#include "testing.h"

namespace tessera::testing {
namespace {

Tensor ints(const std::vector<int64_t>& values, const Shape& shape, DType dtype = DType::i64) {
  return Tensor::from_vector(values, shape).to(dtype);
}

// Row-major coordinates of flat position `flat` in `shape`.
std::vector<int64_t> coords(int64_t flat, const Shape& shape) {
  std::vector<int64_t> c(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    c[d] = flat % shape[d];
    flat /= shape[d];
  }
  return c;
}

int64_t flat_of(const std::vector<int64_t>& c, const Shape& shape) {
  int64_t flat = 0;
  for (size_t d = 0; d < shape.size(); ++d) flat = flat * shape[d] + c[d];
  return flat;
}

// ---- references -----------------------------------------------------------

std::vector<double> ref_gather(const Tensor& x, int64_t dim, const Tensor& index) {
  std::vector<double> xv = x.to_vector<double>();
  std::vector<int64_t> iv = index.to_vector<int64_t>();
  std::vector<double> out(iv.size());
  for (size_t p = 0; p < iv.size(); ++p) {
    auto c = coords(static_cast<int64_t>(p), index.shape());
    c[dim] = iv[p];
    out[p] = xv[flat_of(c, x.shape())];
  }
  return out;
}

std::vector<double> ref_index_select(const Tensor& x, int64_t dim, const Tensor& index) {
  std::vector<double> xv = x.to_vector<double>();
  std::vector<int64_t> iv = index.to_vector<int64_t>();
  Shape shape = x.shape();
  shape[dim] = static_cast<int64_t>(iv.size());
  std::vector<double> out(numel(shape));
  for (int64_t p = 0; p < numel(shape); ++p) {
    auto c = coords(p, shape);
    c[dim] = iv[c[dim]];
    out[p] = xv[flat_of(c, x.shape())];
  }
  return out;
}

std::vector<double> ref_scatter_add(const Tensor& x, int64_t dim, const Tensor& index,
                                    const Tensor& src) {
  std::vector<double> out = x.to_vector<double>();
  std::vector<double> sv = src.to_vector<double>();
  std::vector<int64_t> iv = index.to_vector<int64_t>();
  for (size_t p = 0; p < iv.size(); ++p) {
    auto c = coords(static_cast<int64_t>(p), index.shape());
    double value = sv[flat_of(c, src.shape())];
    c[dim] = iv[p];
    out[flat_of(c, x.shape())] += value;
  }
  return out;
}

std::vector<double> ref_index_add(const Tensor& x, int64_t dim, const Tensor& index,
                                  const Tensor& source, double alpha) {
  std::vector<double> out = x.to_vector<double>();
  std::vector<double> sv = source.to_vector<double>();
  std::vector<int64_t> iv = index.to_vector<int64_t>();
  for (int64_t p = 0; p < source.numel(); ++p) {
    auto c = coords(p, source.shape());
    c[dim] = iv[c[dim]];
    out[flat_of(c, x.shape())] += alpha * sv[p];
  }
  return out;
}

// ---- embedding --------------------------------------------------------------

TEST(Embedding, ForwardMatchesRowLookup) {
  Tensor weight = uniform({7, 5}, -1, 1, 1);
  Tensor indices = ints({3, 0, 6, 3, 1, 2}, {2, 3});
  std::vector<double> w = weight.to_vector<double>(), want;
  for (int64_t i : indices.to_vector<int64_t>()) {
    for (int64_t d = 0; d < 5; ++d) want.push_back(w[i * 5 + d]);
  }
  Tensor out = embedding(weight, indices);
  EXPECT_EQ(out.shape(), (Shape{2, 3, 5}));
  EXPECT_TRUE(all_close(out, want, 0, 0));
  EXPECT_TRUE(all_close(embedding(weight.to(DType::f32), indices.to(DType::i32)), want, 1e-7, 0));
  // Strided weight and indices.
  Tensor weight_t = weight.t().contiguous().t();
  Tensor indices_t = indices.t().contiguous().t();
  EXPECT_FALSE(weight_t.is_contiguous());
  EXPECT_TRUE(all_close(embedding(weight_t, indices_t), want, 0, 0));
  // 0-d indices give one row; integer weights work too.
  EXPECT_TRUE(
      all_close(embedding(weight, ints({6}, {})), std::vector<double>(w.begin() + 30, w.end())));
  Tensor int_weight = ints({1, 2, 3, 4, 5, 6}, {3, 2});
  EXPECT_TRUE(all_close(embedding(int_weight, ints({2, 0}, {2})), {5, 6, 1, 2}));
}

TEST(Embedding, GradientAccumulatesRowsAndSkipsPadding) {
  Tensor weight = uniform({5, 3}, -1, 1, 2).set_requires_grad();
  Tensor indices = ints({1, 4, 1, 2, 1, 0}, {3, 2});
  sum(embedding(weight, indices, 4)).backward();
  EXPECT_TRUE(all_close(weight.grad(), {1, 1, 1, 3, 3, 3, 1, 1, 1, 0, 0, 0, 0, 0, 0}));
  Tensor w2 = uniform({5, 3}, -1, 1, 2).set_requires_grad();
  sum(embedding(w2, indices, -4)).backward();  // -4 is row 1
  EXPECT_TRUE(all_close(w2.grad(), {1, 1, 1, 0, 0, 0, 1, 1, 1, 0, 0, 0, 1, 1, 1}));

  auto fn = [indices](const std::vector<Tensor>& in) { return embedding(in[0], indices); };
  EXPECT_TRUE(gradcheck(fn, {uniform({5, 3}, -1, 1, 3).set_requires_grad()}));
  // Padding rows get no gradient by definition (not by calculus), so check one not looked up.
  auto padded = [indices](const std::vector<Tensor>& in) { return embedding(in[0], indices, 3); };
  EXPECT_TRUE(gradcheck(padded, {uniform({5, 3}, -1, 1, 3).set_requires_grad()}));
  auto squared = [indices](const std::vector<Tensor>& in) {
    Tensor e = embedding(in[0], indices);
    return mul(e, e);
  };
  EXPECT_TRUE(gradgradcheck(squared, {uniform({5, 3}, -1, 1, 4).set_requires_grad()}));
}

TEST(Embedding, ErrorsNameTheBadIndexAndRange) {
  Tensor weight = uniform({7, 4});
  std::string message = error_of([&] { embedding(weight, ints({1, 9, 2}, {3})); });
  EXPECT_HAS(message, "[embedding]");
  EXPECT_HAS(message, "index 9");
  EXPECT_HAS(message, "0 to 6");
  message = error_of([&] { embedding(weight, ints({-1}, {1}, DType::i32)); });
  EXPECT_HAS(message, "index -1");
  EXPECT_HAS(error_of([&] { embedding(weight, uniform({3})); }), "i64 or i32");
  EXPECT_HAS(error_of([&] { embedding(uniform({7}), ints({1}, {1})); }), "2-D");
  EXPECT_HAS(error_of([&] { embedding(weight, ints({1}, {1}), 7); }), "padding_idx 7");
}

// ---- index_select -------------------------------------------------------------

TEST(IndexSelect, ForwardEveryDimAgainstLoops) {
  Tensor x = uniform({3, 4, 5}, -1, 1, 5);
  Tensor xp = uniform({5, 3, 4}, -1, 1, 5).permute({1, 2, 0});  // strided [3, 4, 5]
  ASSERT_FALSE(xp.is_contiguous());
  for (int64_t dim = 0; dim < 3; ++dim) {
    SCOPED_TRACE(dim);
    Tensor index = ints({2, 0, 2, 1}, {4});
    EXPECT_TRUE(all_close(index_select(x, dim, index), ref_index_select(x, dim, index), 0, 0));
    EXPECT_TRUE(all_close(index_select(xp, dim, index.to(DType::i32)),
                          ref_index_select(xp, dim, index), 0, 0));
    EXPECT_TRUE(all_close(index_select(x.to(DType::f32), dim - 3, index),
                          ref_index_select(x.to(DType::f32), dim, index), 0, 0));
  }
  // A strided index, a 0-d index, an empty index.
  Tensor strided_index = ints({1, 9, 0, 9, 2, 9}, {6}).slice(0, 0, 6, 2);
  EXPECT_TRUE(
      all_close(index_select(x, 1, strided_index), ref_index_select(x, 1, ints({1, 0, 2}, {3}))));
  EXPECT_EQ(index_select(x, 2, ints({3}, {})).shape(), (Shape{3, 4, 1}));
  EXPECT_EQ(index_select(x, 0, ints({}, {0})).shape(), (Shape{0, 4, 5}));
}

TEST(IndexSelect, GradientsAndErrors) {
  Tensor index = ints({1, 1, 3, 0}, {4});
  for (int64_t dim : {0, 1}) {
    auto fn = [index, dim](const std::vector<Tensor>& in) {
      return index_select(in[0], dim, index);
    };
    EXPECT_TRUE(gradcheck(fn, {uniform({4, 5}, -1, 1, 6).set_requires_grad()}));
    auto squared = [index, dim](const std::vector<Tensor>& in) {
      Tensor y = index_select(in[0], dim, index);
      return mul(y, y);
    };
    EXPECT_TRUE(gradgradcheck(squared, {uniform({4, 5}, -1, 1, 7).set_requires_grad()}));
  }
  Tensor x = uniform({4, 5});
  std::string message = error_of([&] { index_select(x, 0, ints({0, 4}, {2})); });
  EXPECT_HAS(message, "[index_select]");
  EXPECT_HAS(message, "index 4");
  EXPECT_HAS(message, "0 to 3");
  EXPECT_HAS(error_of([&] { index_select(x, 0, ints({0, 1}, {1, 2})); }), "1-D");
  EXPECT_HAS(error_of([&] { index_select(x, 2, index); }), "[index_select] dim 2");
}

// ---- gather -----------------------------------------------------------------

TEST(Gather, ForwardAgainstLoops) {
  Tensor x = uniform({4, 5, 3}, -1, 1, 8);
  Tensor index0 =
      ints({3, 0, 1, 1, 2, 0, 3, 3, 0, 2, 1, 1}, {2, 3, 2});  // dim 0, smaller elsewhere
  Tensor index1 = ints({4, 0, 1, 3, 3, 2, 0, 0, 1, 4, 2, 2}, {2, 2, 3});
  Tensor index2 = ints({2, 0, 1, 1, 0, 0, 2, 2}, {2, 2, 2});
  EXPECT_TRUE(all_close(gather(x, 0, index0), ref_gather(x, 0, index0), 0, 0));
  EXPECT_TRUE(all_close(gather(x, 1, index1), ref_gather(x, 1, index1), 0, 0));
  EXPECT_TRUE(all_close(gather(x, -1, index2), ref_gather(x, 2, index2), 0, 0));
  EXPECT_EQ(gather(x, 1, index1).shape(), (Shape{2, 2, 3}));
  // Strided x and index, i32 index, f32 and integer data.
  Tensor xs = uniform({3, 5, 4}, -1, 1, 8).transpose(0, 2);
  Tensor is = index1.to(DType::i32).transpose(0, 2).contiguous().transpose(0, 2);
  EXPECT_TRUE(all_close(gather(xs, 1, is), ref_gather(xs, 1, index1), 0, 0));
  EXPECT_TRUE(all_close(gather(x.to(DType::f32), 1, index1),
                        ref_gather(x.to(DType::f32), 1, index1), 0, 0));
  Tensor xi = ints({1, 2, 3, 4, 5, 6}, {2, 3});
  EXPECT_TRUE(all_close(gather(xi, 1, ints({2, 2, 0, 1}, {2, 2})), {3, 3, 4, 5}));
}

TEST(Gather, GradientsAndErrors) {
  Tensor index = ints({2, 0, 2, 1, 1, 1}, {2, 3});
  auto fn = [index](const std::vector<Tensor>& in) { return gather(in[0], 1, index); };
  EXPECT_TRUE(gradcheck(fn, {uniform({3, 4}, -1, 1, 9).set_requires_grad()}));
  auto squared = [index](const std::vector<Tensor>& in) {
    Tensor y = gather(in[0], 0, index);
    return mul(y, y);
  };
  EXPECT_TRUE(gradgradcheck(squared, {uniform({3, 4}, -1, 1, 10).set_requires_grad()}));

  Tensor x = uniform({3, 4});
  std::string message = error_of([&] { gather(x, 1, ints({0, 7}, {1, 2})); });
  EXPECT_HAS(message, "[gather]");
  EXPECT_HAS(message, "index 7");
  EXPECT_HAS(message, "dim 1 of size 4");
  EXPECT_HAS(error_of([&] { gather(x, 0, ints({0, 1}, {2})); }), "as many dims");
  EXPECT_HAS(error_of([&] { gather(x, 0, ints({0, 0, 0, 0, 0}, {1, 5})); }), "[1, 5]");
}

// ---- scatter_add ---------------------------------------------------------------

TEST(ScatterAdd, ForwardAgainstLoopsWithDuplicates) {
  Tensor x = uniform({4, 5}, -1, 1, 11);
  Tensor src = uniform({3, 6}, -1, 1, 12);  // larger than index in dim 1
  Tensor index0 = ints({3, 3, 0, 1, 1, 3, 3, 2, 2, 0}, {2, 5});
  Tensor index1 = ints({0, 0, 4, 0, 2, 1, 1, 1, 3}, {3, 3});
  EXPECT_TRUE(all_close(scatter_add(x, 0, index0, src), ref_scatter_add(x, 0, index0, src)));
  EXPECT_TRUE(all_close(scatter_add(x, 1, index1, src), ref_scatter_add(x, 1, index1, src)));
  // Strided operands, f32 promotion with f64 src, integers.
  Tensor xt = uniform({5, 4}, -1, 1, 11).t();
  Tensor st = uniform({6, 3}, -1, 1, 12).t();
  EXPECT_TRUE(
      all_close(scatter_add(xt, 1, index1.to(DType::i32), st), ref_scatter_add(xt, 1, index1, st)));
  Tensor mixed = scatter_add(x.to(DType::f32), 1, index1, src);
  EXPECT_EQ(mixed.dtype(), DType::f64);
  Tensor xi = ints({0, 0, 0}, {3});
  EXPECT_TRUE(all_close(scatter_add(xi, 0, ints({2, 2, 0}, {3}), ints({1, 2, 3}, {3})), {3, 0, 3}));
}

TEST(ScatterAdd, LargeDeterministicAndCorrect) {
  // Big enough to run in parallel; many duplicates per target.
  Tensor x = zeros({64, 300}, DType::f32);
  Tensor src = uniform({64, 3000}, -1, 1, 13, DType::f32);
  Tensor index = randint(0, 300, {64, 3000});
  Tensor first = scatter_add(x, 1, index, src);
  Tensor second = scatter_add(x, 1, index, src);
  EXPECT_TRUE(all_close(first, second, 0, 0));
  EXPECT_TRUE(all_close(first, ref_scatter_add(x, 1, index, src), 1e-4, 1e-4));
}

TEST(ScatterAdd, GradientsAndErrors) {
  Tensor index = ints({1, 0, 1, 2, 2, 2}, {2, 3});
  auto fn = [index](const std::vector<Tensor>& in) { return scatter_add(in[0], 1, index, in[1]); };
  EXPECT_TRUE(gradcheck(fn, {uniform({2, 4}, -1, 1, 14).set_requires_grad(),
                             uniform({3, 5}, -1, 1, 15).set_requires_grad()}));
  auto squared = [index](const std::vector<Tensor>& in) {
    Tensor y = scatter_add(in[0], 0, index, in[1]);
    return mul(y, y);
  };
  EXPECT_TRUE(gradgradcheck(squared, {uniform({3, 3}, -1, 1, 16).set_requires_grad(),
                                      uniform({2, 3}, -1, 1, 17).set_requires_grad()}));
  Tensor x = zeros({2, 4});
  std::string message = error_of([&] { scatter_add(x, 1, ints({4}, {1, 1}), ones({1, 1})); });
  EXPECT_HAS(message, "[scatter_add]");
  EXPECT_HAS(message, "index 4");
  EXPECT_HAS(message, "0 to 3");
  EXPECT_HAS(error_of([&] {
               scatter_add(x, 1, ints({0, 0}, {1, 2}), ones({1, 1}));
             }),
             "[scatter_add] index shape [1, 2]");
}

// ---- index_add ---------------------------------------------------------------

TEST(IndexAdd, ForwardAgainstLoops) {
  Tensor x = uniform({4, 3, 5}, -1, 1, 18);
  for (int64_t dim = 0; dim < 3; ++dim) {
    SCOPED_TRACE(dim);
    Shape shape = x.shape();
    shape[dim] = 5;
    Tensor source = uniform(shape, -1, 1, 19 + dim);
    Tensor idx = ints({1, x.shape()[dim] - 1, 1, 0, 1}, {5});
    EXPECT_TRUE(all_close(index_add(x, dim, idx, source), ref_index_add(x, dim, idx, source, 1.0)));
    EXPECT_TRUE(all_close(index_add(x, dim, idx.to(DType::i32), source, -0.5),
                          ref_index_add(x, dim, idx, source, -0.5)));
    Tensor strided_source = source.transpose(0, 2).contiguous().transpose(0, 2);
    EXPECT_TRUE(all_close(
        index_add(x.transpose(1, 2).contiguous().transpose(1, 2), dim, idx, strided_source, 2.0),
        ref_index_add(x, dim, idx, source, 2.0)));
  }
}

TEST(IndexAdd, LargeDeterministicAndCorrect) {
  Tensor x = zeros({1000, 64}, DType::f32);
  Tensor index = randint(0, 1000, {20000});
  Tensor source = uniform({20000, 64}, -1, 1, 20, DType::f32);
  Tensor first = index_add(x, 0, index, source);
  EXPECT_TRUE(all_close(first, index_add(x, 0, index, source), 0, 0));
  EXPECT_TRUE(all_close(first, ref_index_add(x, 0, index, source, 1.0), 1e-4, 1e-4));
}

TEST(IndexAdd, GradientsAndErrors) {
  Tensor index = ints({2, 0, 2}, {3});
  auto fn = [index](const std::vector<Tensor>& in) {
    return index_add(in[0], 1, index, in[1], 1.5);
  };
  EXPECT_TRUE(gradcheck(fn, {uniform({2, 4}, -1, 1, 21).set_requires_grad(),
                             uniform({2, 3}, -1, 1, 22).set_requires_grad()}));
  auto squared = [index](const std::vector<Tensor>& in) {
    Tensor y = index_add(in[0], 0, index, in[1]);
    return mul(y, y);
  };
  EXPECT_TRUE(gradgradcheck(squared, {uniform({3, 2}, -1, 1, 23).set_requires_grad(),
                                      uniform({3, 2}, -1, 1, 24).set_requires_grad()}));
  Tensor x = zeros({3, 2});
  std::string message = error_of([&] { index_add(x, 0, ints({3}, {1}), ones({1, 2})); });
  EXPECT_HAS(message, "[index_add]");
  EXPECT_HAS(message, "index 3");
  EXPECT_HAS(message, "0 to 2");
  message = error_of([&] { index_add(x, 0, ints({0, 1}, {2}), ones({2, 3})); });
  EXPECT_HAS(message, "[index_add] source has shape [2, 3]");
  EXPECT_HAS(message, "[2, 2]");
}

// ---- edge cases ------------------------------------------------------------

TEST(IndexOps, EmptyTensors) {
  Tensor weight = uniform({4, 3});
  EXPECT_EQ(embedding(weight, ints({}, {0})).shape(), (Shape{0, 3}));
  EXPECT_EQ(embedding(weight, ints({}, {2, 0})).shape(), (Shape{2, 0, 3}));
  EXPECT_EQ(embedding(zeros({4, 0}), ints({1, 2}, {2})).shape(), (Shape{2, 0}));
  Tensor x = uniform({3, 4});
  EXPECT_EQ(gather(x, 1, ints({}, {3, 0})).shape(), (Shape{3, 0}));
  EXPECT_TRUE(all_close(scatter_add(x, 0, ints({}, {0, 4}), uniform({2, 4})), x, 0, 0));
  EXPECT_TRUE(all_close(index_add(x, 1, ints({}, {0}), zeros({3, 0})), x, 0, 0));
  EXPECT_EQ(index_select(zeros({0, 4}), 1, ints({3, 0}, {2})).shape(), (Shape{0, 2}));
  // Bad indices are errors even when nothing is copied.
  EXPECT_HAS(error_of([&] { embedding(zeros({4, 0}), ints({4}, {1})); }), "index 4");
  EXPECT_HAS(error_of([&] {
               index_add(zeros({0, 4}), 1, ints({5}, {1}), zeros({0, 1}));
             }),
             "index 5");
  // Indexing into an empty dim is always out of range.
  EXPECT_HAS(error_of([&] { index_select(zeros({0, 4}), 0, ints({0}, {1})); }), "has size 0");
  // Gradients through empty lookups are zeros of the right shape.
  Tensor w = uniform({4, 3}).set_requires_grad();
  sum(embedding(w, ints({}, {0}))).backward();
  EXPECT_TRUE(all_close(w.grad(), std::vector<double>(12, 0.0)));
}

// ---- SBP ---------------------------------------------------------------------

TESSERA_SBP_CASE(
    "embedding",
    [] {
      return std::vector<Tensor>{uniform({7, 5}, -1, 1, 1),
                                 ints({3, 0, 6, 3, 1, 2, 5, 5, 4, 0}, {5, 2})};
    },
    Attrs{{"padding_idx", int64_t{-1}}});
TESSERA_SBP_CASE(
    "embedding",
    [] {
      return std::vector<Tensor>{uniform({4, 3}, -1, 1, 2), ints({3, 0, 2, 1, 1}, {5}, DType::i32)};
    },
    Attrs{{"padding_idx", int64_t{2}}});
TESSERA_SBP_CASE(
    "index_select",
    [] {
      return std::vector<Tensor>{uniform({5, 6}, -1, 1, 3), ints({5, 0, 2, 2, 1, 4, 3}, {7})};
    },
    Attrs{{"dim", int64_t{1}}});
TESSERA_SBP_CASE(
    "index_select",
    [] {
      return std::vector<Tensor>{uniform({5, 4, 3}, -1, 1, 3), ints({4, 0, 2, 2, 1}, {5})};
    },
    Attrs{{"dim", int64_t{0}}});
TESSERA_SBP_CASE(
    "gather",
    [] {
      return std::vector<Tensor>{uniform({5, 6}, -1, 1, 4),
                                 ints({5, 0, 2, 2, 1, 4, 3, 3, 0, 1, 2, 5, 4, 4, 0}, {5, 3})};
    },
    Attrs{{"dim", int64_t{1}}});
TESSERA_SBP_CASE(
    "gather",
    [] {
      return std::vector<Tensor>{uniform({4, 3}, -1, 1, 4),
                                 ints({3, 0, 2, 2, 1, 1, 0, 3, 3, 1, 2, 0, 0, 1, 2}, {5, 3})};
    },
    Attrs{{"dim", int64_t{0}}});
TESSERA_SBP_CASE(
    "scatter_add",
    [] {
      return std::vector<Tensor>{
          uniform({5, 4}, -1, 1, 5),
          ints({3, 0, 3, 1, 2, 2, 2, 0, 1, 1, 3, 3, 0, 0, 0, 2, 1, 3, 2, 3}, {5, 4}),
          uniform({5, 4}, -1, 1, 6)};
    },
    Attrs{{"dim", int64_t{1}}});
TESSERA_SBP_CASE(
    "scatter_add",
    [] {
      return std::vector<Tensor>{
          uniform({3, 4}, -1, 1, 5),
          ints({2, 0, 2, 1, 1, 1, 0, 0, 2, 2, 1, 0, 0, 2, 1, 1, 2, 2, 0, 1}, {5, 4}),
          uniform({5, 7}, -1, 1, 6)};
    },
    Attrs{{"dim", int64_t{0}}});
TESSERA_SBP_CASE(
    "index_add",
    [] {
      return std::vector<Tensor>{uniform({5, 6}, -1, 1, 7), ints({4, 0, 4, 2}, {4}),
                                 uniform({4, 6}, -1, 1, 8)};
    },
    Attrs{{"dim", int64_t{0}}, {"alpha", 1.0}});
TESSERA_SBP_CASE(
    "index_add",
    [] {
      return std::vector<Tensor>{uniform({3, 5, 2}, -1, 1, 7), ints({4, 0, 4, 2, 1, 1, 3}, {7}),
                                 uniform({3, 7, 2}, -1, 1, 8)};
    },
    Attrs{{"dim", int64_t{1}}, {"alpha", -2.0}});

}  // namespace
}  // namespace tessera::testing
