#include "testing.h"

namespace tessera::testing {
namespace {

// Concatenation of row-major blocks: for each outer index, each input's slab in turn.
std::vector<double> ref_cat(const std::vector<Tensor>& inputs, int64_t dim) {
  const Shape& shape = inputs[0].shape();
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < dim; ++d) outer *= shape[d];
  for (size_t d = dim + 1; d < shape.size(); ++d) inner *= shape[d];
  std::vector<double> out;
  for (int64_t o = 0; o < outer; ++o) {
    for (const Tensor& t : inputs) {
      std::vector<double> v = t.to_vector<double>();
      int64_t slab = t.shape()[dim] * inner;
      out.insert(out.end(), v.begin() + o * slab, v.begin() + (o + 1) * slab);
    }
  }
  return out;
}

TEST(Cat, ForwardEveryDimAgainstLoops) {
  for (int64_t dim = 0; dim < 3; ++dim) {
    SCOPED_TRACE(dim);
    Shape a_shape = {2, 3, 4}, b_shape = {2, 3, 4}, c_shape = {2, 3, 4};
    b_shape[dim] = 1;
    c_shape[dim] = 5;
    Tensor a = uniform(a_shape, -1, 1, 1), b = uniform(b_shape, -1, 1, 2),
           c = uniform(c_shape, -1, 1, 3);
    Tensor out = cat({a, b, c}, dim);
    Shape want = a_shape;
    want[dim] = a_shape[dim] + 1 + 5;
    EXPECT_EQ(out.shape(), want);
    EXPECT_TRUE(all_close(out, ref_cat({a, b, c}, dim), 0, 0));
    EXPECT_TRUE(all_close(cat({a, b, c}, dim - 3), ref_cat({a, b, c}, dim), 0, 0));
  }
  // Strided inputs (a transposed one and a sliced one).
  Tensor a = uniform({4, 3}, -1, 1, 4).t();
  Tensor b = uniform({3, 10}, -1, 1, 5).slice(1, 0, 10, 2);
  EXPECT_TRUE(all_close(cat({a, b}, 1), ref_cat({a, b}, 1), 0, 0));
  EXPECT_TRUE(all_close(cat({b, a, b}, 1), ref_cat({b, a, b}, 1), 0, 0));
  // Empty pieces, a single input, bool and integer data.
  Tensor empty = zeros({3, 0});
  EXPECT_TRUE(all_close(cat({empty, a, empty}, 1), a.to_vector<double>()));
  EXPECT_TRUE(all_close(cat({a}, 0), a.to_vector<double>()));
  Tensor flags = gt(make({1, -1, 2}), 0);
  EXPECT_TRUE(all_close(cat({flags, logical_not(flags)}), {1, 0, 1, 0, 1, 0}));
  EXPECT_EQ(cat({flags, flags}).dtype(), DType::boolean);
}

TEST(Cat, LargeParallelCopies) {
  Tensor a = uniform({300, 257}, -1, 1, 6, DType::f32);
  Tensor b = uniform({300, 129}, -1, 1, 7, DType::f32);
  EXPECT_TRUE(all_close(cat({a, b}, 1), ref_cat({a, b}, 1), 0, 0));
  EXPECT_TRUE(all_close(cat({a.t(), b.t()}, 0), ref_cat({a.t(), b.t()}, 0), 0, 0));
}

TEST(Cat, PromotesDtypesAndSkipsLegacyEmpty) {
  Tensor i = Tensor::from_vector<int64_t>({1, 2}, {2});
  Tensor f = make({0.5}, {1}, DType::f32);
  Tensor out = cat({i, f});
  EXPECT_EQ(out.dtype(), DType::f32);
  EXPECT_TRUE(all_close(out, {1, 2, 0.5}));
  EXPECT_EQ(cat({f, make({1.0}, {1})}).dtype(), DType::f64);
  // Shape-[0] tensors are skipped next to tensors of another rank.
  Tensor m = uniform({2, 3});
  EXPECT_EQ(cat({zeros({0}), m, zeros({0})}, 1).shape(), (Shape{2, 3}));
  EXPECT_EQ(cat({zeros({0}), zeros({0})}).shape(), (Shape{0}));
}

TEST(Cat, ErrorsNameTheOffendingInput) {
  Tensor a = zeros({2, 3}), b = zeros({2, 3}), c = zeros({4, 4});
  std::string message = error_of([&] { cat({a, b, c}, 1); });
  EXPECT_HAS(message, "[cat] input 2 has shape [4, 4]");
  EXPECT_HAS(message, "input 0 has shape [2, 3]");
  EXPECT_HAS(message, "differ in dim 0");
  message = error_of([&] { cat({a, zeros({2, 3, 1})}); });
  EXPECT_HAS(message, "[cat] input 1 has 3 dims");
  EXPECT_HAS(error_of([&] { cat({}); }), "[cat] needs at least one tensor");
  EXPECT_HAS(error_of([&] { cat({a, b}, 2); }), "[cat] dim 2");
  EXPECT_HAS(error_of([&] { cat({Tensor::scalar(1.0)}); }), "0-d");
}

TEST(Cat, Gradients) {
  auto fn = [](const std::vector<Tensor>& in) { return cat({in[0], in[1], in[2]}, 1); };
  EXPECT_TRUE(gradcheck(fn, {uniform({2, 3}, -1, 1, 8).set_requires_grad(),
                             uniform({2, 1}, -1, 1, 9).set_requires_grad(),
                             uniform({2, 2}, -1, 1, 10).set_requires_grad()}));
  auto squared = [](const std::vector<Tensor>& in) {
    Tensor y = cat({in[0], in[1]}, 0);
    return mul(y, y);
  };
  EXPECT_TRUE(gradgradcheck(squared, {uniform({2, 3}, -1, 1, 11).set_requires_grad(),
                                      uniform({1, 3}, -1, 1, 12).set_requires_grad()}));
  // Only some inputs need gradients; a promoted input gets its own dtype back.
  Tensor a = make({1, 2}).set_requires_grad();
  Tensor b = make({3}, {1}, DType::f32).set_requires_grad();
  Tensor c = make({4, 5});
  sum(mul(cat({a, b, c}), make({1, 2, 3, 4, 5}))).backward();
  EXPECT_TRUE(all_close(a.grad(), {1, 2}));
  EXPECT_EQ(b.grad().dtype(), DType::f32);
  EXPECT_TRUE(all_close(b.grad(), {3}));
}

TEST(Stack, ForwardGradientsAndErrors) {
  Tensor a = uniform({2, 3}, -1, 1, 13), b = uniform({2, 3}, -1, 1, 14);
  std::vector<double> va = a.to_vector<double>(), vb = b.to_vector<double>();
  Tensor s0 = stack({a, b});
  EXPECT_EQ(s0.shape(), (Shape{2, 2, 3}));
  std::vector<double> want0 = va;
  want0.insert(want0.end(), vb.begin(), vb.end());
  EXPECT_TRUE(all_close(s0, want0, 0, 0));
  Tensor s2 = stack({a, b}, -1);
  EXPECT_EQ(s2.shape(), (Shape{2, 3, 2}));
  std::vector<double> want2;
  for (size_t k = 0; k < va.size(); ++k) {
    want2.push_back(va[k]);
    want2.push_back(vb[k]);
  }
  EXPECT_TRUE(all_close(s2, want2, 0, 0));
  EXPECT_EQ(stack({Tensor::scalar(1.0), Tensor::scalar(2.0)}).shape(), (Shape{2}));
  auto fn = [](const std::vector<Tensor>& in) { return stack({in[0], in[1]}, 1); };
  EXPECT_TRUE(gradcheck(fn, {uniform({2, 3}, -1, 1, 15).set_requires_grad(),
                             uniform({2, 3}, -1, 1, 16).set_requires_grad()}));
  std::string message = error_of([&] { stack({a, b, zeros({3, 2})}); });
  EXPECT_HAS(message, "[stack] input 2 has shape [3, 2]");
  EXPECT_HAS(error_of([&] { stack({a, b}, 3); }), "[stack] dim 3");
}

TEST(Split, SizesAndSectionsAreViews) {
  Tensor x = arange(0, 10).to(DType::f64).reshape({2, 5});
  auto pieces = split(x, 2, 1);
  ASSERT_EQ(pieces.size(), 3u);
  EXPECT_TRUE(all_close(pieces[0], {0, 1, 5, 6}));
  EXPECT_TRUE(all_close(pieces[1], {2, 3, 7, 8}));
  EXPECT_TRUE(all_close(pieces[2], {4, 9}));
  EXPECT_TRUE(pieces[1].shares_storage(x));
  auto sections = split(x, {1, 0, 4}, -1);
  ASSERT_EQ(sections.size(), 3u);
  EXPECT_EQ(sections[1].shape(), (Shape{2, 0}));
  EXPECT_TRUE(all_close(sections[2], {1, 2, 3, 4, 6, 7, 8, 9}));
  auto single = split(x, {2}, 0);  // one section, not pieces of 2
  ASSERT_EQ(single.size(), 1u);
  EXPECT_EQ(single[0].shape(), (Shape{2, 5}));
  EXPECT_EQ(split(x, 7, 1).size(), 1u);
  EXPECT_EQ(split(zeros({0, 3}), 2).size(), 1u);
  EXPECT_HAS(error_of([&] { split(x, {1, 2}, 1); }), "[split] sections [1, 2] sum to 3");
  EXPECT_HAS(error_of([&] { split(x, 0, 1); }), "[split] split_size must be positive");
  // Gradients flow back through the views.
  Tensor y = uniform({4, 3}, -1, 1, 17).set_requires_grad();
  auto parts = split(y, {1, 3});
  sum(add(mul(parts[0], 2.0), sum(parts[1], {0}, true))).backward();
  EXPECT_TRUE(all_close(y.grad(), {2, 2, 2, 1, 1, 1, 1, 1, 1, 1, 1, 1}));
}

TEST(Chunk, MatchesTorchChunkSizes) {
  auto sizes = [](const std::vector<Tensor>& pieces, int64_t dim) {
    std::vector<int64_t> out;
    for (const Tensor& t : pieces) out.push_back(t.shape()[dim]);
    return out;
  };
  Tensor x = uniform({5, 6});
  EXPECT_EQ(sizes(chunk(x, 4), 0), (std::vector<int64_t>{2, 2, 1}));  // fewer than asked
  EXPECT_EQ(sizes(chunk(x, 4, 1), 1), (std::vector<int64_t>{2, 2, 2}));
  EXPECT_EQ(sizes(chunk(x, 2, 1), 1), (std::vector<int64_t>{3, 3}));
  EXPECT_EQ(sizes(chunk(x, 9), 0), (std::vector<int64_t>{1, 1, 1, 1, 1}));
  EXPECT_EQ(chunk(zeros({0, 3}), 3).size(), 3u);
  auto pieces = chunk(x, 2, 1);
  EXPECT_TRUE(all_close(cat(pieces, 1), x, 0, 0));
  EXPECT_HAS(error_of([&] { chunk(x, 0); }), "[chunk] chunks must be positive");
}

// ---- SBP ---------------------------------------------------------------------

TESSERA_SBP_CASE(
    "cat",
    [] {
      return std::vector<Tensor>{uniform({5, 3}, -1, 1, 1), uniform({5, 4}, -1, 1, 2)};
    },
    Attrs{{"dim", int64_t{1}}});
TESSERA_SBP_CASE(
    "cat",
    [] {
      return std::vector<Tensor>{uniform({2, 5, 3}, -1, 1, 1), uniform({1, 5, 3}, -1, 1, 2),
                                 uniform({4, 5, 3}, -1, 1, 3)};
    },
    Attrs{{"dim", int64_t{0}}});

}  // namespace
}  // namespace tessera::testing
