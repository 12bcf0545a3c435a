#include "testing.h"

namespace tessera::testing {
namespace {

Tensor iota(const Shape& shape) { return arange(0, numel(shape)).to(DType::f64).reshape(shape); }

TEST(View, ReshapeSharesStorageWhenPossible) {
  Tensor x = iota({2, 3, 4});
  Tensor y = x.reshape({6, 4});
  EXPECT_TRUE(y.shares_storage(x));
  EXPECT_TRUE(all_close(y, x.to_vector<double>()));
  EXPECT_EQ(x.reshape({-1}).shape(), (Shape{24}));
  EXPECT_EQ(x.reshape({4, -1}).shape(), (Shape{4, 6}));
  // A transposed tensor cannot be flattened without a copy: reshape copies,
  // view refuses with a message.
  Tensor t = x.transpose(1, 2);
  Tensor flat = t.reshape({24});
  EXPECT_FALSE(flat.shares_storage(x));
  std::vector<double> want;
  for (int i = 0; i < 2; ++i)
    for (int k = 0; k < 4; ++k)
      for (int j = 0; j < 3; ++j) want.push_back((i * 3 + j) * 4 + k);
  EXPECT_TRUE(all_close(flat, want));
  EXPECT_THROW(t.view({24}), Error);
  EXPECT_THROW(x.reshape({5, -1}), Error);
  EXPECT_THROW(x.reshape({-1, -1}), Error);
}

TEST(View, WritesThroughViewsAreVisibleInTheBase) {
  Tensor x = zeros({3, 4}, DType::f32);
  Tensor row = x.select(0, 1);
  Tensor column = x.select(1, 2);
  row.data<float>()[0] = 5.0f;                                  // x[1, 0]
  column.data<float>()[column.strides()[0] * 2] = 7.0f;         // x[2, 2]
  std::vector<double> values = x.to_vector<double>();
  EXPECT_EQ(values[4], 5.0);
  EXPECT_EQ(values[10], 7.0);
  EXPECT_TRUE(row.shares_storage(x));
  EXPECT_EQ(row.shape(), (Shape{4}));
}

TEST(View, PermuteTransposeSliceNarrowSelect) {
  Tensor x = iota({2, 3, 4});
  Tensor p = x.permute({2, 0, 1});
  EXPECT_EQ(p.shape(), (Shape{4, 2, 3}));
  EXPECT_EQ(p.strides(), (Strides{1, 12, 4}));
  std::vector<double> want;
  for (int k = 0; k < 4; ++k)
    for (int i = 0; i < 2; ++i)
      for (int j = 0; j < 3; ++j) want.push_back((i * 3 + j) * 4 + k);
  EXPECT_TRUE(all_close(p, want));
  EXPECT_TRUE(all_close(x.slice(2, 1, 4, 2), {1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23}));
  EXPECT_TRUE(all_close(x.slice(1, -2, 100), {4, 5, 6, 7, 8, 9, 10, 11, 16, 17, 18, 19, 20, 21, 22, 23}));
  EXPECT_TRUE(all_close(x.narrow(0, 1, 1).select(1, 0), {12, 13, 14, 15}));
  EXPECT_TRUE(all_close(x.select(2, -1), {3, 7, 11, 15, 19, 23}));
  EXPECT_EQ(x.slice(1, 2, 1).shape(), (Shape{2, 0, 4}));
  EXPECT_THROW(x.narrow(1, 2, 2), Error);
  EXPECT_THROW(x.select(0, 2), Error);
  EXPECT_THROW(x.permute({0, 0, 1}), Error);
  EXPECT_THROW(x.slice(0, 0, 1, 0), Error);
}

TEST(View, ExpandSqueezeUnsqueezeFlatten) {
  Tensor x = make({1, 2, 3}, {3, 1});
  Tensor e = x.expand({2, 3, 4});
  EXPECT_EQ(e.strides(), (Strides{0, 1, 0}));
  EXPECT_TRUE(e.shares_storage(x));
  EXPECT_TRUE(all_close(sum(e, {0, 2}), {8, 16, 24}));
  EXPECT_EQ(x.expand({-1, 5}).shape(), (Shape{3, 5}));
  EXPECT_THROW(x.expand({4, 1}), Error);
  EXPECT_EQ(x.squeeze().shape(), (Shape{3}));
  EXPECT_EQ(x.squeeze(0).shape(), (Shape{3, 1}));
  EXPECT_EQ(x.unsqueeze(0).shape(), (Shape{1, 3, 1}));
  EXPECT_EQ(x.unsqueeze(-1).shape(), (Shape{3, 1, 1}));
  Tensor y = iota({2, 3, 4, 5});
  EXPECT_EQ(y.flatten().shape(), (Shape{120}));
  EXPECT_EQ(y.flatten(1).shape(), (Shape{2, 60}));
  EXPECT_EQ(y.flatten(1, 2).shape(), (Shape{2, 12, 5}));
  EXPECT_TRUE(y.flatten(1, 2).shares_storage(y));
}

TEST(View, ContiguousCopiesOnlyWhenNeeded) {
  Tensor x = iota({3, 4});
  EXPECT_TRUE(x.contiguous().is_same(x));
  Tensor t = x.t();
  EXPECT_FALSE(t.is_contiguous());
  Tensor c = t.contiguous();
  EXPECT_TRUE(c.is_contiguous());
  EXPECT_FALSE(c.shares_storage(x));
  EXPECT_TRUE(all_close(c, {0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11}));
  Tensor clone = x.clone();
  EXPECT_FALSE(clone.shares_storage(x));
}

TEST(View, GradientsFlowThroughViews) {
  Tensor x = uniform({2, 3, 4}).set_requires_grad();
  auto check = [&](auto fn) {
    EXPECT_TRUE(gradcheck([fn](const std::vector<Tensor>& in) { return fn(in[0]); }, {x}));
  };
  check([](const Tensor& t) { return t.reshape({4, 6}); });
  check([](const Tensor& t) { return t.transpose(0, 2).reshape({-1}); });
  check([](const Tensor& t) { return t.permute({1, 2, 0}); });
  check([](const Tensor& t) { return t.slice(2, 1, 4, 2); });
  check([](const Tensor& t) { return t.narrow(1, 1, 2); });
  check([](const Tensor& t) { return t.select(0, 1); });
  check([](const Tensor& t) { return t.unsqueeze(1).expand({2, 5, 3, 4}); });
  check([](const Tensor& t) { return t.flatten(0, 1).squeeze(); });
  check([](const Tensor& t) { return mul(t.slice(1, 0, 2), t.slice(1, 1, 3)); });
  EXPECT_TRUE(gradgradcheck([](const std::vector<Tensor>& in) {
    Tensor s = in[0].slice(2, 0, 4, 3);
    return mul(s, s).transpose(0, 1);
  }, {x}));
}

Attrs shape_attr(Shape s) { return Attrs{{"shape", s}}; }

// reshape merging a split dim with the dims after it keeps the split.
TESSERA_SBP_CASE(
    "reshape",
    [] {
      return std::vector<Tensor>{uniform({6, 3, 4})};
    },
    shape_attr({18, 4}));
TESSERA_SBP_CASE("reshape", [] { return std::vector<Tensor>{uniform({5, 3, 4})}; }, shape_attr({5, 12}));
TESSERA_SBP_CASE("reshape", [] { return std::vector<Tensor>{uniform({6, 4})}; }, shape_attr({2, 3, 4}));
// A dim divided: rows split in whole groups of 3 on 2 and 4 ranks, not on 3.
TESSERA_SBP_CASE(
    "reshape",
    [] {
      return std::vector<Tensor>{uniform({12, 5})};
    },
    shape_attr({4, 3, 5}));
TESSERA_SBP_CASE("permute", [] { return std::vector<Tensor>{uniform({5, 3, 4})}; },
                 Attrs{{"dims", std::vector<int64_t>{2, 0, 1}}});
TESSERA_SBP_CASE("slice", [] { return std::vector<Tensor>{uniform({5, 7})}; },
                 Attrs{{"dim", int64_t{1}}, {"start", int64_t{1}}, {"end", int64_t{6}}, {"step", int64_t{2}}});
TESSERA_SBP_CASE("slice_backward", [] { return std::vector<Tensor>{uniform({5, 3})}; },
                 Attrs{{"input_shape", Shape{5, 7}}, {"dim", int64_t{1}}, {"start", int64_t{1}},
                       {"end", int64_t{6}}, {"step", int64_t{2}}});
TESSERA_SBP_CASE("expand", [] { return std::vector<Tensor>{uniform({5, 1, 3})}; }, shape_attr({2, 5, 4, 3}));

TEST(ViewOverflow, SizeArithmeticIsCheckedAndNamesTheOp) {
  const int64_t big = std::numeric_limits<int64_t>::max();
  Tensor x = make({1, 2});
  // 3 * 6148914691236517206 wraps to 2, the element count of x.
  EXPECT_HAS(error_of([&] { x.reshape({3, 6148914691236517206}); }), "[reshape]");
  EXPECT_HAS(error_of([&] { x.view({3, 6148914691236517206}); }), "[view]");
  EXPECT_HAS(error_of([&] { x.reshape({-1, 3, 6148914691236517206}); }), "[reshape]");
  EXPECT_HAS(error_of([&] { x.narrow(0, 1, big); }), "[narrow]");
  EXPECT_HAS(error_of([&] { make({1}).expand({int64_t{1} << 62, 4}); }), "[expand]");
  EXPECT_HAS(error_of([&] { make({1}).expand({-2}); }), "[expand] invalid size -2");
  EXPECT_HAS(error_of([] {
               Tensor::from_vector<double>({1, 2}, {3, 6148914691236517206});
             }),
             "[from_vector]");
  // PyTorch: torch.tensor([1., 2.])[0:2:2**63-1] is tensor([1.]).
  Tensor stepped = x.slice(0, 0, 2, big);
  EXPECT_EQ(stepped.shape(), Shape{1});
  EXPECT_TRUE(all_close(stepped, {1}));
  EXPECT_EQ(x.slice(0, 1, big, big).shape(), Shape{1});
  // Two views of 2^62 rows each fit; joined, their rows do not.
  Tensor tall = Tensor::from_vector<double>({1}, {1, 1}).expand({int64_t{1} << 62, 1});
  EXPECT_HAS(error_of([&] { cat({tall, tall}); }), "[cat]");
}

}  // namespace
}  // namespace tessera::testing
