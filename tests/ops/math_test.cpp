// The math family against PyTorch (values, dtypes, gradients, errors) and
// against hand values; SBP cases for every op.

#include <cmath>

#include "testing.h"
#include "torch_check.h"

namespace tessera::testing {
namespace {

using V = std::vector<Tensor>;

const std::vector<std::vector<Shape>> kUnaryShapes = {{{3, 4}}, {{}}, {{0}}, {{2, 0, 3}}};
const std::vector<std::vector<Shape>> kBinaryShapes = {
    {{3, 4}, {3, 4}}, {{3, 1}, {4}}, {{}, {2, 3}}, {{2, 3}, {}}, {{0, 3}, {3}}};

TorchOptions range(double low, double high) {
  TorchOptions options;
  options.low = low;
  options.high = high;
  return options;
}

TEST(MathTorch, Unary) {
  EXPECT_TRUE(sweep_torch("torch.erfc(a)", kUnaryShapes, [](const V& x) { return erfc(x[0]); },
                          range(-3, 3)));
  EXPECT_TRUE(sweep_torch("torch.erfinv(a)", kUnaryShapes,
                          [](const V& x) { return erfinv(x[0]); }, range(-0.99, 0.99)));
  EXPECT_TRUE(sweep_torch("torch.log1p(a)", kUnaryShapes, [](const V& x) { return log1p(x[0]); },
                          range(-0.9, 3)));
  EXPECT_TRUE(sweep_torch("torch.expm1(a)", kUnaryShapes, [](const V& x) { return expm1(x[0]); },
                          range(-3, 3)));
  EXPECT_TRUE(sweep_torch("torch.log2(a)", kUnaryShapes, [](const V& x) { return log2(x[0]); },
                          range(0.1, 5)));
  EXPECT_TRUE(sweep_torch("torch.log10(a)", kUnaryShapes, [](const V& x) { return log10(x[0]); },
                          range(0.1, 5)));
  EXPECT_TRUE(sweep_torch("torch.exp2(a)", kUnaryShapes, [](const V& x) { return exp2(x[0]); },
                          range(-3, 3)));
  EXPECT_TRUE(sweep_torch("torch.reciprocal(a)", kUnaryShapes,
                          [](const V& x) { return reciprocal(x[0]); }, range(0.5, 3)));
  EXPECT_TRUE(sweep_torch("torch.floor(a)", kUnaryShapes, [](const V& x) { return floor(x[0]); },
                          range(-3, 3)));
  EXPECT_TRUE(sweep_torch("torch.ceil(a)", kUnaryShapes, [](const V& x) { return ceil(x[0]); },
                          range(-3, 3)));
  EXPECT_TRUE(sweep_torch("torch.trunc(a)", kUnaryShapes, [](const V& x) { return trunc(x[0]); },
                          range(-3, 3)));
  EXPECT_TRUE(sweep_torch("torch.round(a)", kUnaryShapes, [](const V& x) { return round(x[0]); },
                          range(-3, 3)));
  EXPECT_TRUE(sweep_torch("torch.round(a, decimals=2)", kUnaryShapes,
                          [](const V& x) { return round(x[0], 2); }, range(-3, 3)));
  EXPECT_TRUE(sweep_torch("torch.round(a * 1000, decimals=-2)", kUnaryShapes,
                          [](const V& x) { return round(mul(x[0], 1000.0), -2); }, range(-3, 3)));
  EXPECT_TRUE(sweep_torch("torch.frac(a)", kUnaryShapes, [](const V& x) { return frac(x[0]); },
                          range(-3, 3)));
  EXPECT_TRUE(sweep_torch("torch.sign(a)", kUnaryShapes, [](const V& x) { return sign(x[0]); },
                          range(-3, 3)));
  EXPECT_TRUE(sweep_torch("torch.nan_to_num(a)", kUnaryShapes,
                          [](const V& x) { return nan_to_num(x[0]); }));
}

TEST(MathTorch, SpecialValuesAndIntegers) {
  Tensor special = make({NAN, INFINITY, -INFINITY, -0.0, 0.5, 1.5, 2.5, -2.5, 1.0, -1.0});
  const V all = {special};
  for (const char* name : {"erfc", "erfinv", "log1p", "expm1", "log2", "log10", "exp2",
                           "reciprocal", "floor", "ceil", "trunc", "round", "frac", "sign",
                           "nan_to_num", "isnan", "isinf", "isfinite"}) {
    SCOPED_TRACE(name);
    const std::string n = name;
    EXPECT_TRUE(matches_torch("torch." + n + "(a)", all, [n](const V& x) -> Outputs {
      const Tensor& a = x[0];
      if (n == "erfc") return erfc(a);
      if (n == "erfinv") return erfinv(a);
      if (n == "log1p") return log1p(a);
      if (n == "expm1") return expm1(a);
      if (n == "log2") return log2(a);
      if (n == "log10") return log10(a);
      if (n == "exp2") return exp2(a);
      if (n == "reciprocal") return reciprocal(a);
      if (n == "floor") return floor(a);
      if (n == "ceil") return ceil(a);
      if (n == "trunc") return trunc(a);
      if (n == "round") return round(a);
      if (n == "frac") return frac(a);
      if (n == "sign") return sign(a);
      if (n == "nan_to_num") return nan_to_num(a);
      if (n == "isnan") return isnan(a);
      if (n == "isinf") return isinf(a);
      return isfinite(a);
    }, [] { TorchOptions o; o.grad = false; return o; }()));
  }
  EXPECT_TRUE(matches_torch("torch.nan_to_num(a, nan=1.0, posinf=2.0, neginf=-3.0)",
                            {special.to(DType::f32)},
                            [](const V& x) { return nan_to_num(x[0], 1.0, 2.0, -3.0); }));
  EXPECT_TRUE(matches_torch("torch.nan_to_num(a)", {special.to(DType::f32)},
                            [](const V& x) { return nan_to_num(x[0]); }));
  Tensor ints = Tensor::from_vector<int64_t>({-3, 0, 2, 7}, {4});
  const V int_input = {ints};
  EXPECT_TRUE(matches_torch("torch.floor(a)", int_input, [](const V& x) { return floor(x[0]); }));
  EXPECT_TRUE(matches_torch("torch.round(a)", int_input, [](const V& x) { return round(x[0]); }));
  EXPECT_TRUE(matches_torch("torch.sign(a)", int_input, [](const V& x) { return sign(x[0]); }));
  EXPECT_TRUE(matches_torch("torch.log1p(a.abs())", int_input,
                            [](const V& x) { return log1p(abs(x[0])); }));
  EXPECT_TRUE(matches_torch("torch.erfinv(a)", int_input, [](const V& x) { return erfinv(x[0]); }));
  EXPECT_TRUE(matches_torch("torch.isinf(a)", int_input, [](const V& x) { return isinf(x[0]); }));
  EXPECT_TRUE(matches_torch("torch.frac(a)", int_input, [](const V& x) { return frac(x[0]); }));
  EXPECT_TRUE(matches_torch("torch.round(a, decimals=1)", int_input,
                            [](const V& x) { return round(x[0], 1); }));
}

TEST(MathTorch, Binary) {
  EXPECT_TRUE(sweep_torch("torch.remainder(a, b)", kBinaryShapes,
                          [](const V& x) { return remainder(x[0], x[1]); }, range(-3, 3)));
  EXPECT_TRUE(sweep_torch("torch.fmod(a, b)", kBinaryShapes,
                          [](const V& x) { return fmod(x[0], x[1]); }, range(-3, 3)));
  EXPECT_TRUE(sweep_torch("torch.atan2(a, b)", kBinaryShapes,
                          [](const V& x) { return atan2(x[0], x[1]); }, range(-3, 3)));
  EXPECT_TRUE(sweep_torch("torch.hypot(a, b)", kBinaryShapes,
                          [](const V& x) { return hypot(x[0], x[1]); }, range(0.5, 3)));
  EXPECT_TRUE(sweep_torch("torch.logaddexp(a, b)", kBinaryShapes,
                          [](const V& x) { return logaddexp(x[0], x[1]); }, range(-3, 3)));
  EXPECT_TRUE(sweep_torch("torch.logaddexp2(a, b)", kBinaryShapes,
                          [](const V& x) { return logaddexp2(x[0], x[1]); }, range(-3, 3)));
  EXPECT_TRUE(sweep_torch("torch.logical_xor(a > 0, b)", kBinaryShapes,
                          [](const V& x) { return logical_xor(gt(x[0], 0.0), x[1]); }));
  EXPECT_TRUE(sweep_torch("torch.div(a, b, rounding_mode='floor')", kBinaryShapes,
                          [](const V& x) { return div(x[0], x[1], "floor"); }, range(-3, 3)));
  EXPECT_TRUE(sweep_torch("torch.div(a, b, rounding_mode='trunc')", kBinaryShapes,
                          [](const V& x) { return div(x[0], x[1], "trunc"); }, range(-3, 3)));
  EXPECT_TRUE(sweep_torch("torch.div(a, b, rounding_mode=None)", kBinaryShapes,
                          [](const V& x) { return div(x[0], x[1], std::nullopt); }, range(0.5, 3)));
  EXPECT_TRUE(sweep_torch("torch.remainder(a, 1.5)", kUnaryShapes,
                          [](const V& x) { return remainder(x[0], 1.5); }, range(-3, 3)));
  EXPECT_TRUE(sweep_torch("torch.remainder(2, a)", kUnaryShapes,
                          [](const V& x) { return remainder(2, x[0]); }, range(0.5, 3)));
}

TEST(MathTorch, IntegerDivisionAndPromotion) {
  Tensor a = Tensor::from_vector<int64_t>({-7, 7, -7, 7, 0}, {5});
  Tensor b = Tensor::from_vector<int64_t>({2, -2, -2, 2, 3}, {5});
  for (const char* expression :
       {"torch.remainder(a, b)", "torch.fmod(a, b)", "torch.div(a, b, rounding_mode='floor')",
        "torch.div(a, b, rounding_mode='trunc')", "torch.atan2(a, b)", "torch.hypot(a, b)"}) {
    SCOPED_TRACE(expression);
    const std::string e = expression;
    EXPECT_TRUE(matches_torch(e, {a, b}, [e](const V& x) -> Outputs {
      if (e == "torch.remainder(a, b)") return remainder(x[0], x[1]);
      if (e == "torch.fmod(a, b)") return fmod(x[0], x[1]);
      if (e == "torch.atan2(a, b)") return atan2(x[0], x[1]);
      if (e == "torch.hypot(a, b)") return hypot(x[0], x[1]);
      return div(x[0], x[1], e.find("floor") != std::string::npos ? "floor" : "trunc");
    }));
  }
  Tensor zero = Tensor::from_vector<int64_t>({1, 0, 1, 1, 1}, {5});
  EXPECT_TRUE(matches_torch("torch.remainder(a, b)", {a, zero},
                            [](const V& x) { return remainder(x[0], x[1]); }));
  EXPECT_TRUE(matches_torch("torch.div(a, b, rounding_mode='floor')", {a, zero},
                            [](const V& x) { return div(x[0], x[1], "floor"); }));
  EXPECT_HAS(error_of([&] { fmod(a, zero); }), "[fmod] integer division by zero");
  EXPECT_HAS(error_of([&] { div(a, zero, "round"); }), "rounding_mode='round' is not valid");
  // 0-d tensors and scalars do not raise the category of a dimensioned tensor.
  Tensor f32 = uniform({3}, -1, 1, 2, DType::f32);
  EXPECT_TRUE(matches_torch("torch.atan2(a, b)", {f32, make({2.0})},
                            [](const V& x) { return atan2(x[0], x[1]); }));
  EXPECT_TRUE(matches_torch("a + b", {f32, make({2.0})}, [](const V& x) { return add(x[0], x[1]); }));
  EXPECT_TRUE(matches_torch("a * b", {Tensor::from_vector<int32_t>({1, 2}, {2}), make({2.5})},
                            [](const V& x) { return mul(x[0], x[1]); }));
  EXPECT_TRUE(matches_torch("a + b", {f32, Tensor::from_vector<int64_t>({4}, {})},
                            [](const V& x) { return add(x[0], x[1]); }));
  EXPECT_EQ(result_type(Tensor::from_vector<int32_t>({1}, {1}), Tensor::from_vector<int64_t>({1}, {})),
            DType::i32);
}

TEST(MathTorch, Compositions) {
  EXPECT_TRUE(sweep_torch("torch.lerp(a, b, 0.3)", kBinaryShapes,
                          [](const V& x) { return lerp(x[0], x[1], 0.3); }));
  EXPECT_TRUE(sweep_torch("torch.lerp(a, b, c)", {{{3, 4}, {4}, {3, 1}}, {{}, {2}, {}}},
                          [](const V& x) { return lerp(x[0], x[1], x[2]); }));
  EXPECT_TRUE(sweep_torch("torch.addcmul(a, b, c, value=0.5)", {{{3, 4}, {4}, {3, 1}}, {{}, {2}, {}}},
                          [](const V& x) { return addcmul(x[0], x[1], x[2], 0.5); }));
  EXPECT_TRUE(sweep_torch("torch.addcdiv(a, b, c, value=-2)", {{{3, 4}, {4}, {3, 1}}, {{}, {2}, {}}},
                          [](const V& x) { return addcdiv(x[0], x[1], x[2], -2); }, range(0.5, 2)));
  Tensor ints = Tensor::from_vector<int64_t>({1, -2, 3}, {3});
  EXPECT_TRUE(matches_torch("torch.addcdiv(a, a, a)", {ints},
                            [](const V& x) { return addcdiv(x[0], x[0], x[0]); }));
  EXPECT_TRUE(matches_torch("torch.addcmul(a, a, a, value=2)", {ints},
                            [](const V& x) { return addcmul(x[0], x[0], x[0], 2); }));
  EXPECT_TRUE(matches_torch("torch.lerp(a, b, 0.5)", {uniform({3}), uniform({3}, -1, 1, 2, DType::f32)},
                            [](const V& x) { return lerp(x[0], x[1], 0.5); }));
}

TEST(MathTorch, ExistingOpsSignatures) {
  EXPECT_TRUE(sweep_torch("torch.add(a, b, alpha=2.5)", kBinaryShapes,
                          [](const V& x) { return add(x[0], x[1], 2.5); }));
  EXPECT_TRUE(sweep_torch("torch.sub(a, b, alpha=-3)", kBinaryShapes,
                          [](const V& x) { return sub(x[0], x[1], -3); }));
  Tensor ints = Tensor::from_vector<int64_t>({1, -2, 3}, {3});
  EXPECT_TRUE(matches_torch("torch.add(a, a, alpha=0.5)", {ints},
                            [](const V& x) { return add(x[0], x[0], 0.5); }));
  EXPECT_TRUE(matches_torch("torch.add(a, a, alpha=3)", {ints},
                            [](const V& x) { return add(x[0], x[0], 3); }));
  EXPECT_TRUE(sweep_torch("torch.clamp(a, b, c)", {{{3, 4}, {4}, {3, 1}}, {{}, {2}, {}}, {{0, 2}, {2}, {}}},
                          [](const V& x) { return clamp(x[0], x[1], x[2]); }));
  EXPECT_TRUE(sweep_torch("torch.clamp(a, min=b)", kBinaryShapes,
                          [](const V& x) { return clamp(x[0], x[1], std::nullopt); }));
  EXPECT_TRUE(sweep_torch("torch.clamp(a, max=b)", kBinaryShapes,
                          [](const V& x) { return clamp(x[0], std::nullopt, x[1]); }));
  EXPECT_TRUE(sweep_torch("torch.clamp_min(a, b)", kBinaryShapes,
                          [](const V& x) { return clamp_min(x[0], x[1]); }));
  EXPECT_TRUE(sweep_torch("torch.clamp_max(a, 0.2)", kUnaryShapes,
                          [](const V& x) { return clamp_max(x[0], 0.2); }));
  // Ties with a bound: x's gradient flows where x equals it, as PyTorch.
  EXPECT_TRUE(matches_torch("torch.clamp(a, b, c)", {make({0.0, 1.0, 2.0}), make({1.0}), make({1.0})},
                            [](const V& x) { return clamp(x[0], x[1], x[2]); }));
  EXPECT_TRUE(matches_torch("torch.clamp(a, min=torch.tensor(0.5))", {ints},
                            [](const V& x) { return clamp(x[0], Tensor::scalar(0.5), std::nullopt); }));
  EXPECT_TRUE(sweep_torch("torch.masked_fill(a, b > 0, c)", {{{3, 4}, {4}, {}}, {{4}, {2, 4}, {}}, {{}, {}, {}}},
                          [](const V& x) { return masked_fill(x[0], gt(x[1], 0.0), x[2]); }));
  EXPECT_TRUE(matches_torch("torch.masked_fill(a, b > 0, 2.5)", {uniform({3}), uniform({2, 3})},
                            [](const V& x) { return masked_fill(x[0], gt(x[1], 0.0), 2.5); }));
  EXPECT_HAS(error_of([] { masked_fill(uniform({3}), gt(uniform({3}), 0.0), uniform({1})); }),
             "[masked_fill] value must be a 0-d tensor");
}

// Hand values (independent of PyTorch).
TEST(Math, HandValues) {
  EXPECT_TRUE(all_close(remainder(make({-3, 3, -3, 3}), make({2, 2, -2, -2})), {1, 1, -1, -1}));
  EXPECT_TRUE(all_close(fmod(make({-3, 3, -3, 3}), make({2, 2, -2, -2})), {-1, 1, -1, 1}));
  EXPECT_TRUE(all_close(div(make({-7, 7}), make({2, 2}), "floor"), {-4, 3}));
  EXPECT_TRUE(all_close(div(make({-7, 7}), make({2, 2}), "trunc"), {-3, 3}));
  EXPECT_TRUE(all_close(round(make({0.5, 1.5, 2.5, -0.5})), {0, 2, 2, 0}));
  EXPECT_TRUE(all_close(erfinv(make({0.0, 0.5, -0.9})), {0, 0.4769362762044699, -1.1630871536766743},
                        1e-12, 1e-12));
  EXPECT_TRUE(all_close(hypot(make({3.0}), make({4.0})), {5}));
  EXPECT_TRUE(all_close(logaddexp(make({0.0}), make({0.0})), {std::log(2.0)}));
  EXPECT_TRUE(all_close(sign(make({-2, 0, 3, NAN})), {-1, 0, 1, 0}));
  EXPECT_TRUE(gradcheck([](const V& x) { return atan2(x[0], x[1]); },
                        {uniform({2, 3}, 0.5, 2, 1).set_requires_grad(),
                         uniform({3}, 0.5, 2, 2).set_requires_grad()}));
  EXPECT_TRUE(gradcheck([](const V& x) { return erfinv(x[0]); },
                        {uniform({2, 3}, -0.9, 0.9, 3).set_requires_grad()}));
}

// ---- SBP cases -----------------------------------------------------------

#define MATH_UNARY_SBP(name, low, high) \
  TESSERA_SBP_CASE(name, [] { return std::vector<Tensor>{uniform({5, 7}, low, high, 3)}; })
MATH_UNARY_SBP("erfc", -2, 2);
MATH_UNARY_SBP("erfinv", -0.9, 0.9);
MATH_UNARY_SBP("log1p", 0, 2);
MATH_UNARY_SBP("expm1", -2, 2);
MATH_UNARY_SBP("log2", 0.5, 2);
MATH_UNARY_SBP("log10", 0.5, 2);
MATH_UNARY_SBP("exp2", -2, 2);
MATH_UNARY_SBP("reciprocal", 0.5, 2);
MATH_UNARY_SBP("floor", -2, 2);
MATH_UNARY_SBP("ceil", -2, 2);
MATH_UNARY_SBP("trunc", -2, 2);
MATH_UNARY_SBP("frac", -2, 2);
MATH_UNARY_SBP("sign", -2, 2);
MATH_UNARY_SBP("isnan", -2, 2);
MATH_UNARY_SBP("isinf", -2, 2);
MATH_UNARY_SBP("isfinite", -2, 2);
TESSERA_SBP_CASE("round", [] { return std::vector<Tensor>{uniform({5, 7}, -2, 2, 3)}; },
                 Attrs{{"decimals", int64_t{1}}});
TESSERA_SBP_CASE("nan_to_num", [] { return std::vector<Tensor>{uniform({5, 7}, -2, 2, 3)}; },
                 Attrs{{"nan", 0.0}, {"posinf", 1.0}, {"neginf", -1.0}});

#define MATH_BINARY_SBP(name)                                                                 \
  TESSERA_SBP_CASE(name, [] { return std::vector<Tensor>{uniform({5, 7}, 0.5, 2, 1), uniform({7}, 0.5, 2, 2)}; }); \
  TESSERA_SBP_CASE(name, [] { return std::vector<Tensor>{uniform({4, 1, 3}, 0.5, 2, 3), uniform({5, 3}, 0.5, 2, 4)}; })
MATH_BINARY_SBP("remainder");
MATH_BINARY_SBP("fmod");
MATH_BINARY_SBP("atan2");
MATH_BINARY_SBP("hypot");
MATH_BINARY_SBP("logaddexp");
MATH_BINARY_SBP("logaddexp2");
TESSERA_SBP_CASE("div_rounding",
                 [] { return std::vector<Tensor>{uniform({5, 7}, -3, 3, 1), uniform({7}, 0.5, 2, 2)}; },
                 Attrs{{"rounding_mode", std::string("floor")}});
TESSERA_SBP_CASE("logical_xor",
                 [] { return std::vector<Tensor>{gt(uniform({5, 4}), 0), gt(uniform({4}, -1, 1, 2), 0)}; });
TESSERA_SBP_CASE("clamp_tensor", [] {
  return std::vector<Tensor>{uniform({5, 4}, -2, 2, 1), uniform({4}, -1, 0, 2), uniform({5, 1}, 0, 1, 3)};
});

}  // namespace
}  // namespace tessera::testing
