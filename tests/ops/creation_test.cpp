#include <cmath>
#include <limits>

#include "testing.h"

namespace tessera::testing {
namespace {

TEST(Creation, FillsAndLikes) {
  EXPECT_TRUE(all_close(zeros({2, 2}), {0, 0, 0, 0}));
  EXPECT_TRUE(all_close(ones({3}, DType::i32), {1, 1, 1}));
  EXPECT_EQ(ones({3}, DType::i32).dtype(), DType::i32);
  EXPECT_TRUE(all_close(full({2}, 2.5), {2.5, 2.5}));
  EXPECT_EQ(full({2}, 3).dtype(), DType::i64);
  EXPECT_EQ(full({2}, true).dtype(), DType::boolean);
  Tensor x = uniform({2, 3});
  EXPECT_EQ(zeros_like(x).shape(), x.shape());
  EXPECT_EQ(ones_like(x, DType::f32).dtype(), DType::f32);
  EXPECT_TRUE(all_close(full_like(x, 7), std::vector<double>(6, 7)));
  EXPECT_EQ(zeros({0, 3}).numel(), 0);
  EXPECT_THROW(zeros({-1}), Error);
}

TEST(Creation, ArangeLinspaceEye) {
  EXPECT_TRUE(all_close(arange(5), {0, 1, 2, 3, 4}));
  EXPECT_EQ(arange(5).dtype(), DType::i64);
  EXPECT_TRUE(all_close(arange(1, 2, 0.25), {1, 1.25, 1.5, 1.75}));
  EXPECT_EQ(arange(1, 2, 0.25).dtype(), DType::f32);
  EXPECT_TRUE(all_close(arange(5, 0, -2), {5, 3, 1}));
  EXPECT_EQ(arange(3, 3).numel(), 0);
  EXPECT_THROW(arange(0, 5, -1), Error);
  EXPECT_THROW(arange(0, 5, 0), Error);
  EXPECT_TRUE(all_close(linspace(0, 1, 5), {0, 0.25, 0.5, 0.75, 1}));
  EXPECT_EQ(linspace(-1, 1, 7, DType::f64).to_vector<double>().back(), 1.0);
  EXPECT_TRUE(all_close(linspace(2, 3, 1), {2}));
  EXPECT_TRUE(all_close(eye(2, 3), {1, 0, 0, 0, 1, 0}));
  EXPECT_TRUE(all_close(eye(2), {1, 0, 0, 1}));
}

TEST(Creation, RandomIsSeededAndCounterBased) {
  manual_seed(42);
  Tensor a = rand({1000});
  Tensor b = randn({1000});
  manual_seed(42);
  EXPECT_TRUE(all_close(rand({1000}), a, 0, 0));
  EXPECT_TRUE(all_close(randn({1000}), b, 0, 0));
  // Different calls advance the stream.
  manual_seed(42);
  Tensor c = rand({1000});
  Tensor d = rand({1000});
  EXPECT_FALSE(all_close(c, d, 0, 0));
  // Element i depends only on (seed, offset, i): a longer draw starts with
  // the same values as a shorter one from the same state.
  Generator g1(7), g2(7);
  Tensor shorter = rand({10}, DType::f32, &g1);
  Tensor longer = rand({20}, DType::f32, &g2);
  EXPECT_TRUE(all_close(longer.slice(0, 0, 10), shorter, 0, 0));
}

TEST(Creation, RandomRegionIsTheSliceOfTheWholeDraw) {
  Generator whole_gen(11), region_gen(11);
  Tensor whole = randn({6, 5, 4}, DType::f64, &whole_gen);
  Tensor region = randn_region({6, 5, 4}, {2, 1, 0}, {3, 4, 2}, DType::f64, &region_gen);
  EXPECT_TRUE(all_close(region, whole.narrow(0, 2, 3).narrow(1, 1, 4).narrow(2, 0, 2), 0, 0));
  // The generator moved past the whole tensor, so the next draws agree too.
  EXPECT_TRUE(all_close(rand_region({4, 4}, {0, 2}, {4, 2}, DType::f32, &region_gen),
                        rand({4, 4}, DType::f32, &whole_gen).narrow(1, 2, 2), 0, 0));
  EXPECT_HAS(error_of([] { rand_region({4, 4}, {3, 0}, {2, 4}); }),
             "[rand_region] region starting at [3, 0] of size [2, 4] is not inside shape [4, 4]");
}

TEST(Creation, RandomDistributions) {
  Generator g(3);
  Tensor u = rand({200000}, DType::f64, &g);
  EXPECT_NEAR(mean(u).item<double>(), 0.5, 0.005);
  EXPECT_GE(min(u).item<double>(), 0.0);
  EXPECT_LT(max(u).item<double>(), 1.0);
  Tensor n = randn({200000}, DType::f32, &g);
  EXPECT_NEAR(mean(n).item<double>(), 0.0, 0.01);
  EXPECT_NEAR(tessera::std(n).item<double>(), 1.0, 0.01);
  Tensor r = randint(-3, 4, {100000}, DType::i64, &g);
  EXPECT_EQ(min(r).item<int64_t>(), -3);
  EXPECT_EQ(max(r).item<int64_t>(), 3);
  EXPECT_NEAR(mean(r.to(DType::f64)).item<double>(), 0.0, 0.05);
  EXPECT_THROW(randint(3, 3, {2}), Error);
  EXPECT_THROW(rand({2}, DType::i64), Error);
  EXPECT_EQ(rand_like(u).dtype(), DType::f64);
  EXPECT_EQ(randn_like(n).shape(), n.shape());
  EXPECT_EQ(randint_like(r, 0, 2).dtype(), DType::i64);
}

TEST(Creation, FromVectorChecksSize) {
  EXPECT_THROW(Tensor::from_vector<float>({1, 2, 3}, {2, 2}), Error);
  Tensor t = tensor({1.0f, 2.0f});
  EXPECT_EQ(t.dtype(), DType::f32);
  EXPECT_EQ(Tensor::scalar(3.5, DType::f64).item<double>(), 3.5);
}

Attrs factory(Shape shape, DType dtype) { return Attrs{{"shape", shape}, {"dtype", dtype}}; }

TESSERA_SBP_CASE("full", [] { return std::vector<Tensor>{}; }, factory({3, 2}, DType::f32).set("value", 1.5));
TESSERA_SBP_CASE("arange", [] { return std::vector<Tensor>{}; },
                 factory({5}, DType::f32).set("start", 1.0).set("step", 0.5));
TESSERA_SBP_CASE("linspace", [] { return std::vector<Tensor>{}; },
                 factory({5}, DType::f32).set("start", 0.0).set("end", 1.0));
TESSERA_SBP_CASE("eye", [] { return std::vector<Tensor>{}; }, factory({3, 4}, DType::f32));
TESSERA_SBP_CASE("rand", [] { return std::vector<Tensor>{}; },
                 factory({4, 3}, DType::f32).set("seed", int64_t{1}).set("offset", int64_t{0}));
TESSERA_SBP_CASE("randn", [] { return std::vector<Tensor>{}; },
                 factory({4, 3}, DType::f32).set("seed", int64_t{1}).set("offset", int64_t{0}));
TESSERA_SBP_CASE("randint", [] { return std::vector<Tensor>{}; },
                 factory({4, 3}, DType::i64).set("seed", int64_t{1}).set("offset", int64_t{0})
                     .set("low", int64_t{0}).set("high", int64_t{9}));

TEST(FullConversion, ValuesThatDoNotFitAnIntegerDtypeAreErrors) {
  // PyTorch: torch.full((2,), nan, dtype=torch.int64) raises "value cannot
  // be converted to type int64_t without overflow"; so do inf and 1e30.
  const double nan = std::nan("");
  EXPECT_HAS(error_of([&] { full({2}, nan, DType::i64); }), "[full] value nan");
  EXPECT_HAS(error_of([&] { full({2}, INFINITY, DType::i32); }), "[full]");
  EXPECT_HAS(error_of([&] { full({2}, 1e30, DType::i64); }), "[full]");
  EXPECT_HAS(error_of([&] { full({1}, int64_t{1} << 40, DType::i32); }), "[full]");
  EXPECT_HAS(error_of([&] { full({1}, 300, DType::u8); }), "[full]");
  // torch.full((1,), -1, dtype=torch.uint8) is 255; 2.5 into int64 is 2.
  EXPECT_EQ(full({1}, -1, DType::u8).item<uint8_t>(), 255);
  EXPECT_EQ(full({1}, 2.5, DType::i64).item<int64_t>(), 2);
  EXPECT_EQ(full({1}, std::numeric_limits<int64_t>::min()).item<int64_t>(),
            std::numeric_limits<int64_t>::min());
  EXPECT_TRUE(full({1}, nan, DType::boolean).item<bool>());
  EXPECT_HAS(error_of([] { full({3, 6148914691236517206}, 1.0); }), "[full]");
}

TEST(FullConversion, IntegersAbove2To53StayExact) {
  const int64_t odd = (int64_t{1} << 53) + 1;  // not representable in double
  EXPECT_EQ(full({1}, odd).item<int64_t>(), odd);
  EXPECT_EQ(full({1}, std::numeric_limits<int64_t>::max()).item<int64_t>(),
            std::numeric_limits<int64_t>::max());
}

TEST(Randint, FullInt64RangeWrapsWithoutOverflow) {
  const int64_t low = std::numeric_limits<int64_t>::min();
  const int64_t high = std::numeric_limits<int64_t>::max();
  Generator generator(7);
  std::vector<int64_t> values =
      randint(low, high, {256}, DType::i64, &generator).to_vector<int64_t>();
  int64_t negative = 0;
  for (int64_t value : values) negative += value < 0;
  // Uniform over the whole range: about half negative; exact integers, so
  // the low bits vary too (a double would round them to multiples of 2^11).
  EXPECT_GT(negative, 64);
  EXPECT_LT(negative, 192);
  int64_t odd = 0;
  for (int64_t value : values) odd += value & 1;
  EXPECT_GT(odd, 64);
  EXPECT_LT(odd, 192);
}


TEST(Creation, IntegerBoundsMustBeFinite) {
  // Truncating an infinite bound to an integer would be undefined, not a range.
  const double inf = std::numeric_limits<double>::infinity();
  const char* message = "[arange] bounds must be finite";
  EXPECT_HAS(error_of([&] { arange(0.0, inf, 1.0, DType::i64); }), message);
  EXPECT_HAS(error_of([&] { arange(0.0, 4.0, inf, DType::i32); }), message);
  EXPECT_HAS(error_of([&] {
               addmm(zeros({2, 2}, DType::i64), zeros({2, 2}, DType::i64),
                     zeros({2, 2}, DType::i64), 1, inf);
             }),
             "[addmm] beta and alpha must be finite");
}

}  // namespace
}  // namespace tessera::testing
