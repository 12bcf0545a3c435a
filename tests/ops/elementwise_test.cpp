#include <cmath>

#include "testing.h"
#include "torch_check.h"

namespace tessera::testing {
namespace {

// Applies a scalar reference to every element.
std::vector<double> map(const Tensor& x, double (*f)(double)) {
  std::vector<double> out = x.to_vector<double>();
  for (double& v : out) v = f(v);
  return out;
}

struct UnaryCase {
  const char* name;
  Tensor (*op)(const Tensor&);
  double (*reference)(double);
  double low, high;
};

double ref_relu(double x) { return x > 0 ? x : 0; }
double ref_sigmoid(double x) { return 1 / (1 + std::exp(-x)); }
double ref_silu(double x) { return x / (1 + std::exp(-x)); }
double ref_rsqrt(double x) { return 1 / std::sqrt(x); }
double ref_gelu(double x) { return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))); }
double ref_softplus(double x) { return std::log1p(std::exp(x)); }
double ref_neg(double x) { return -x; }
double ref_abs(double x) { return std::abs(x); }
double ref_exp(double x) { return std::exp(x); }
double ref_log(double x) { return std::log(x); }
double ref_sqrt(double x) { return std::sqrt(x); }
double ref_sin(double x) { return std::sin(x); }
double ref_cos(double x) { return std::cos(x); }
double ref_tanh(double x) { return std::tanh(x); }
double ref_erf(double x) { return std::erf(x); }

Tensor gelu_default(const Tensor& x) { return gelu(x); }
Tensor softplus_default(const Tensor& x) { return softplus(x); }

const UnaryCase kUnary[] = {
    {"neg", neg, ref_neg, -3, 3},          {"abs", abs, ref_abs, -3, 3},
    {"exp", exp, ref_exp, -5, 5},          {"log", log, ref_log, 0.1, 5},
    {"sqrt", sqrt, ref_sqrt, 0.1, 5},      {"rsqrt", rsqrt, ref_rsqrt, 0.1, 5},
    {"sin", sin, ref_sin, -3, 3},          {"cos", cos, ref_cos, -3, 3},
    {"tanh", tanh, ref_tanh, -4, 4},       {"sigmoid", sigmoid, ref_sigmoid, -6, 6},
    {"relu", relu, ref_relu, -3, 3},       {"gelu", gelu_default, ref_gelu, -4, 4},
    {"silu", silu, ref_silu, -4, 4},       {"softplus", softplus_default, ref_softplus, -4, 4},
    {"erf", erf, ref_erf, -3, 3},
};

TEST(Unary, ForwardMatchesReferenceF32AndF64) {
  for (const UnaryCase& c : kUnary) {
    SCOPED_TRACE(c.name);
    // Long enough to exercise the vectorised body and the tail.
    Tensor x64 = uniform({1037}, c.low, c.high, 3);
    EXPECT_TRUE(all_close(c.op(x64), map(x64, c.reference), 1e-12, 1e-12));
    Tensor x32 = x64.to(DType::f32);
    EXPECT_TRUE(all_close(c.op(x32), map(x32, c.reference), 2e-6, 2e-6));
  }
}

TEST(Unary, GradientsMatchFiniteDifferences) {
  for (const UnaryCase& c : kUnary) {
    SCOPED_TRACE(c.name);
    Tensor x = uniform({2, 3}, c.low, c.high, 5).set_requires_grad();
    if (std::string(c.name) == "relu" || std::string(c.name) == "abs") {
      x = make({-1.5, -0.3, 0.2, 0.7, 1.1, 2.5}, {2, 3}).set_requires_grad();  // away from the kink
    }
    auto op = c.op;
    EXPECT_TRUE(gradcheck([op](const std::vector<Tensor>& in) { return op(in[0]); }, {x}));
  }
}

TEST(Unary, ReluBackwardIsOnePassAndDifferentiable) {
  Tensor x = make({-1.5, -0.3, 0.2, 0.7, 1.1, 2.5}, {2, 3}).set_requires_grad();  // off the kink
  EXPECT_TRUE(gradgradcheck([](const std::vector<Tensor>& in) { return relu(in[0]); }, {x}));
  Tensor g = make({1, 2, 3, 4, 5, 6}, {2, 3});
  EXPECT_TRUE(all_close(relu_backward(g, x.detach()), {0, 0, 3, 4, 5, 6}));
  EXPECT_TRUE(all_close(relu_backward(g, relu(x.detach())), {0, 0, 3, 4, 5, 6}));
  EXPECT_HAS(error_of([&] { relu_backward(g, make({1, 2}, {2})); }),
             "[relu_backward] grad f64[2, 3] and input f64[2]");
}

// gelu'(x), written out for the reference.
double ref_gelu_derivative(double x, bool tanh_form) {
  if (tanh_form) {
    const double k = std::sqrt(2 / M_PI), c = 0.044715;
    const double t = std::tanh(k * (x + c * x * x * x));
    return 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * k * (1 + 3 * c * x * x);
  }
  return 0.5 * (1 + std::erf(x / std::sqrt(2.0))) + x * std::exp(-x * x / 2) / std::sqrt(2 * M_PI);
}

TEST(Unary, GeluBackwardIsOnePassAndDifferentiable) {
  for (const std::string form : {"none", "tanh"}) {
    SCOPED_TRACE(form);
    // Long enough for the vectorised body and the tail.
    Tensor x = uniform({1037}, -5, 5, 21);
    Tensor g = uniform({1037}, -2, 2, 22);
    std::vector<double> want;
    const std::vector<double> xs = x.to_vector<double>(), gs = g.to_vector<double>();
    for (size_t i = 0; i < xs.size(); ++i) {
      want.push_back(gs[i] * ref_gelu_derivative(xs[i], form == "tanh"));
    }
    EXPECT_TRUE(all_close(gelu_backward(g, x, form), want, 1e-12, 1e-12));
    EXPECT_TRUE(
        all_close(gelu_backward(g.to(DType::f32), x.to(DType::f32), form), want, 2e-6, 2e-6));
    // gelu's gradient is this op, and its own gradient (both inputs) is right.
    Tensor v = uniform({2, 3}, -3, 3, 23).set_requires_grad();
    auto op = [form](const std::vector<Tensor>& in) { return gelu(in[0], form); };
    EXPECT_TRUE(gradcheck(op, {v}));
    EXPECT_TRUE(gradgradcheck(op, {v}));
    auto backward = [form](const std::vector<Tensor>& in) {
      return gelu_backward(in[0], in[1], form);
    };
    Tensor h = uniform({2, 3}, -1, 1, 24).set_requires_grad();
    EXPECT_TRUE(gradcheck(backward, {h, v}));
    EXPECT_TRUE(gradgradcheck(backward, {h, v}));
  }
  Tensor g = make({1, 2, 3, 4, 5, 6}, {2, 3});
  EXPECT_HAS(error_of([&] {
               gelu_backward(g, make({1, 2}, {2}));
             }),
             "[gelu_backward] grad f64[2, 3] and input f64[2]");
  EXPECT_HAS(error_of([&] { gelu_backward(g, g, "fast"); }), "approximate='fast'");
}

TEST(Unary, SecondOrderGradients) {
  for (const UnaryCase& c : kUnary) {
    if (std::string(c.name) == "relu" || std::string(c.name) == "abs") continue;
    SCOPED_TRACE(c.name);
    Tensor x = uniform({4}, c.low, c.high, 9).set_requires_grad();
    auto op = c.op;
    EXPECT_TRUE(gradgradcheck([op](const std::vector<Tensor>& in) { return op(in[0]); }, {x}));
  }
}

TEST(Unary, GeluTanhFormAndSoftplusOptions) {
  Tensor x = uniform({257}, -4, 4, 4);
  std::vector<double> want;
  for (double v : x.to_vector<double>()) {
    want.push_back(0.5 * v * (1 + std::tanh(std::sqrt(2 / M_PI) * (v + 0.044715 * v * v * v))));
  }
  EXPECT_TRUE(all_close(gelu(x, "tanh"), want, 1e-12, 1e-12));
  EXPECT_TRUE(all_close(gelu(x.to(DType::f32), "tanh"), want, 2e-6, 2e-6));
  Tensor y = make({-1.0, 0.5, 30.0});
  EXPECT_TRUE(all_close(softplus(y, 2.0, 20.0),
                        {std::log1p(std::exp(-2.0)) / 2, std::log1p(std::exp(1.0)) / 2, 30.0}));
  Tensor g = make({-0.7, 0.4, 1.3}).set_requires_grad();
  EXPECT_TRUE(gradcheck([](const std::vector<Tensor>& in) { return gelu(in[0], "tanh"); }, {g}));
  EXPECT_TRUE(gradcheck([](const std::vector<Tensor>& in) { return softplus(in[0], 2.0, 1.0); },
                        {make({-0.7, 0.4, 1.3}).set_requires_grad()}));
  EXPECT_THROW(gelu(x, "fast"), Error);
}

TEST(Unary, SpecialValues) {
  Tensor x = make({-INFINITY, INFINITY, NAN, 0.0, -100.0, 100.0}, {}, DType::f32);
  EXPECT_TRUE(all_close(exp(x), {0, INFINITY, NAN, 1, 0, INFINITY}));
  EXPECT_TRUE(all_close(tanh(x), {-1, 1, NAN, 0, -1, 1}));
  EXPECT_TRUE(all_close(sigmoid(x), {0, 1, NAN, 0.5, 0, 1}));
  EXPECT_TRUE(all_close(relu(x), {0, INFINITY, NAN, 0, 0, 100}));
}

TEST(Unary, IntegerInputsPromoteForFloatingFunctions) {
  Tensor i = Tensor::from_vector<int64_t>({1, 4, 9}, {3});
  Tensor r = sqrt(i);
  EXPECT_EQ(r.dtype(), DType::f32);
  EXPECT_TRUE(all_close(r, {1, 2, 3}));
  EXPECT_EQ(neg(i).dtype(), DType::i64);
  EXPECT_TRUE(all_close(abs(neg(i)), {1, 4, 9}));
}

// ---- binary --------------------------------------------------------------

TEST(Binary, BroadcastingForwardAgainstLoops) {
  Tensor a = uniform({2, 3, 4}, -2, 2, 1);
  Tensor b = uniform({3, 1}, 0.5, 2, 2);
  std::vector<double> va = a.to_vector<double>(), vb = b.to_vector<double>();
  std::vector<double> sum_ref, sub_ref, mul_ref, div_ref, pow_ref, max_ref, min_ref;
  for (int i = 0; i < 2; ++i) {
    for (int j = 0; j < 3; ++j) {
      for (int k = 0; k < 4; ++k) {
        double x = va[(i * 3 + j) * 4 + k], y = vb[j];
        sum_ref.push_back(x + y);
        sub_ref.push_back(x - y);
        mul_ref.push_back(x * y);
        div_ref.push_back(x / y);
        pow_ref.push_back(std::pow(std::abs(x), y));
        max_ref.push_back(std::max(x, y));
        min_ref.push_back(std::min(x, y));
      }
    }
  }
  EXPECT_EQ(add(a, b).shape(), (Shape{2, 3, 4}));
  EXPECT_TRUE(all_close(add(a, b), sum_ref));
  EXPECT_TRUE(all_close(sub(a, b), sub_ref));
  EXPECT_TRUE(all_close(mul(a, b), mul_ref));
  EXPECT_TRUE(all_close(div(a, b), div_ref));
  EXPECT_TRUE(all_close(pow(abs(a), b), pow_ref));
  EXPECT_TRUE(all_close(maximum(a, b), max_ref));
  EXPECT_TRUE(all_close(minimum(a, b), min_ref));
  // The same through strided (transposed) inputs.
  Tensor at = a.transpose(0, 2).contiguous().transpose(0, 2);
  EXPECT_FALSE(at.is_contiguous());
  EXPECT_TRUE(all_close(add(at, b), sum_ref));
}

TEST(Binary, TypePromotionAndScalars) {
  Tensor i = Tensor::from_vector<int64_t>({1, 2, 3}, {3});
  Tensor f = make({0.5, 0.5, 0.5}, {}, DType::f32);
  EXPECT_EQ(add(i, f).dtype(), DType::f32);
  EXPECT_EQ(add(i, 2).dtype(), DType::i64);
  EXPECT_EQ(add(i, 2.5).dtype(), DType::f32);
  EXPECT_EQ(div(i, i).dtype(), DType::f32);
  // A 0-d tensor does not raise the dtype within its category (PyTorch's
  // result_type): f32 [3] + f64 [] is f32; two 0-d tensors promote fully.
  EXPECT_EQ(add(f, make({1.0}, {}, DType::f64)).dtype(), DType::f32);
  EXPECT_EQ(add(make({1.0}, {}, DType::f32), make({1.0}, {}, DType::f64)).dtype(), DType::f64);
  EXPECT_TRUE(all_close(div(i, 2), {0.5, 1.0, 1.5}));
  EXPECT_TRUE(all_close(sub(10, i), {9, 8, 7}));
  EXPECT_TRUE(all_close(div(6.0, f), {12, 12, 12}));
  EXPECT_TRUE(all_close(pow(i, 2), {1, 4, 9}));
  EXPECT_TRUE(all_close(i * 2 + 1, {3, 5, 7}));
}

TEST(Binary, GradientsWithBroadcasting) {
  using Fn = Tensor (*)(const Tensor&, const Tensor&);
  const std::pair<const char*, Fn> ops[] = {
      {"add", [](const Tensor& a, const Tensor& b) { return add(a, b); }},
      {"sub", [](const Tensor& a, const Tensor& b) { return sub(a, b); }},
      {"mul", [](const Tensor& a, const Tensor& b) { return mul(a, b); }},
      {"div", [](const Tensor& a, const Tensor& b) { return div(a, b); }},
      {"pow", [](const Tensor& a, const Tensor& b) { return pow(a, b); }},
      {"maximum", [](const Tensor& a, const Tensor& b) { return maximum(a, b); }},
      {"minimum", [](const Tensor& a, const Tensor& b) { return minimum(a, b); }},
  };
  for (auto [name, fn] : ops) {
    SCOPED_TRACE(name);
    Tensor a = uniform({2, 3}, 0.5, 2, 1).set_requires_grad();
    Tensor b = uniform({3}, 0.6, 2.1, 2).set_requires_grad();
    EXPECT_TRUE(gradcheck([fn](const std::vector<Tensor>& in) { return fn(in[0], in[1]); }, {a, b}));
    EXPECT_TRUE(gradgradcheck([fn](const std::vector<Tensor>& in) { return fn(in[0], in[1]); }, {a, b}));
  }
}

TEST(Binary, ExtremaSplitGradientOnTies) {
  Tensor a = make({1.0, 2.0}).set_requires_grad();
  Tensor b = make({1.0, 3.0}).set_requires_grad();
  sum(maximum(a, b)).backward();
  EXPECT_TRUE(all_close(a.grad(), {0.5, 0.0}));
  EXPECT_TRUE(all_close(b.grad(), {0.5, 1.0}));
}

TEST(Binary, ShapeMismatchNamesOpAndShapes) {
  Tensor a = zeros({2, 3});
  Tensor b = zeros({4});
  try {
    add(a, b);
    FAIL() << "expected an error";
  } catch (const Error& error) {
    std::string message = error.what();
    EXPECT_NE(message.find("[add]"), std::string::npos) << message;
    EXPECT_NE(message.find("[2, 3]"), std::string::npos) << message;
    EXPECT_NE(message.find("[4]"), std::string::npos) << message;
  }
}

// ---- comparisons, where, clamp, cast ---------------------------------------

TEST(Compare, AllComparisonsAndLogic) {
  Tensor a = make({1, 2, 3});
  Tensor b = make({3, 2, 1});
  EXPECT_TRUE(all_close(eq(a, b), {0, 1, 0}));
  EXPECT_TRUE(all_close(ne(a, b), {1, 0, 1}));
  EXPECT_TRUE(all_close(lt(a, b), {1, 0, 0}));
  EXPECT_TRUE(all_close(le(a, b), {1, 1, 0}));
  EXPECT_TRUE(all_close(gt(a, b), {0, 0, 1}));
  EXPECT_TRUE(all_close(ge(a, b), {0, 1, 1}));
  EXPECT_EQ(eq(a, b).dtype(), DType::boolean);
  EXPECT_TRUE(all_close(gt(a, 1.5), {0, 1, 1}));
  EXPECT_TRUE(all_close(logical_and(gt(a, 1), lt(a, 3)), {0, 1, 0}));
  EXPECT_TRUE(all_close(logical_or(lt(a, 2), gt(a, 2)), {1, 0, 1}));
  EXPECT_TRUE(all_close(logical_not(gt(a, 1)), {1, 0, 0}));
  EXPECT_FALSE(gt(a.set_requires_grad(), 1).requires_grad());
}

TEST(Where, SelectsAndRoutesGradients) {
  Tensor condition = gt(make({1, -1, 2, -2}), 0);
  Tensor a = make({10, 20, 30, 40}).set_requires_grad();
  Tensor b = make({5}).set_requires_grad();
  Tensor out = where(condition, a, b);
  EXPECT_TRUE(all_close(out, {10, 5, 30, 5}));
  sum(out).backward();
  EXPECT_TRUE(all_close(a.grad(), {1, 0, 1, 0}));
  EXPECT_TRUE(all_close(b.grad(), {2}));
  EXPECT_TRUE(gradcheck([condition](const std::vector<Tensor>& in) { return where(condition, in[0], in[1]); },
                        {uniform({4}).set_requires_grad(), uniform({1}).set_requires_grad()}));
  EXPECT_THROW(where(make({1, 0}), a, b), Error);
}

TEST(MaskedFill, FillsWhereMaskIsTrue) {
  Tensor x = make({1, 2, 3, 4}, {2, 2}).set_requires_grad();
  Tensor mask = Tensor::from_vector<bool>({true, false}, {1, 2});
  Tensor out = masked_fill(x, mask, -1.0);
  EXPECT_TRUE(all_close(out, {-1, 2, -1, 4}));
  sum(out).backward();
  EXPECT_TRUE(all_close(x.grad(), {0, 1, 0, 1}));
  EXPECT_THROW(masked_fill(x, zeros({2, 2}), 0.0), Error);
}

TEST(Clamp, BoundsAndGradient) {
  Tensor x = make({-2, -0.5, 0.5, 2, NAN});
  EXPECT_TRUE(all_close(clamp(x, -1.0, 1.0), {-1, -0.5, 0.5, 1, NAN}));
  EXPECT_TRUE(all_close(clamp(x, 0.0, std::nullopt), {0, 0, 0.5, 2, NAN}));
  EXPECT_TRUE(all_close(clamp(x, std::nullopt, 0.0), {-2, -0.5, 0, 0, NAN}));
  Tensor y = make({-2, -0.5, 0.5, 2}).set_requires_grad();
  sum(clamp(y, -1.0, 1.0)).backward();
  EXPECT_TRUE(all_close(y.grad(), {0, 1, 1, 0}));
  EXPECT_TRUE(all_close(clamp(y.detach(), 1.0, -1.0), {-1, -1, -1, -1}));  // max wins, as PyTorch
  EXPECT_TRUE(gradcheck([](const std::vector<Tensor>& in) { return clamp(in[0], -1.0, 1.0); },
                        {make({-2, -0.5, 0.5, 2}).set_requires_grad()}));
}

TEST(Cast, RoundTripsAndHalfPrecision) {
  Tensor x = make({1.5, -2.25, 65504.0, 1e-3});
  EXPECT_TRUE(all_close(x.to(DType::f16), {1.5, -2.25, 65504.0, 1e-3}, 1e-3, 0));
  EXPECT_TRUE(all_close(x.to(DType::bf16), {1.5, -2.25, 65536.0, 1e-3}, 8e-3, 0));
  EXPECT_TRUE(all_close(x.to(DType::i64), {1, -2, 65504, 0}));
  EXPECT_TRUE(all_close(x.to(DType::boolean), {1, 1, 1, 1}));
  EXPECT_TRUE(all_close(make({70000.0}).to(DType::f16), {INFINITY}));
  Tensor y = make({1.0, 2.0}).set_requires_grad();
  sum(mul(y.to(DType::f32), 3.0)).backward();
  EXPECT_EQ(y.grad().dtype(), DType::f64);
  EXPECT_TRUE(all_close(y.grad(), {3, 3}));
}

// ---- SBP cases -----------------------------------------------------------

Tensor positive(const Shape& shape, uint64_t seed) { return uniform(shape, 0.5, 2.0, seed); }

#define UNARY_SBP(name, low, high) \
  TESSERA_SBP_CASE(name, [] { return std::vector<Tensor>{uniform({5, 7}, low, high, 3)}; })
UNARY_SBP("neg", -2, 2);
UNARY_SBP("abs", -2, 2);
UNARY_SBP("exp", -2, 2);
UNARY_SBP("log", 0.5, 2);
UNARY_SBP("sqrt", 0.5, 2);
UNARY_SBP("rsqrt", 0.5, 2);
UNARY_SBP("sin", -2, 2);
UNARY_SBP("cos", -2, 2);
UNARY_SBP("tanh", -2, 2);
UNARY_SBP("sigmoid", -2, 2);
UNARY_SBP("relu", -2, 2);
UNARY_SBP("erf", -2, 2);
UNARY_SBP("silu", -2, 2);
UNARY_SBP("copy", -2, 2);
TESSERA_SBP_CASE("gelu", [] { return std::vector<Tensor>{uniform({5, 7}, -2, 2, 3)}; },
                 Attrs{{"approximate", std::string("none")}});
TESSERA_SBP_CASE("softplus", [] { return std::vector<Tensor>{uniform({5, 7}, -2, 2, 3)}; },
                 Attrs{{"beta", 1.0}, {"threshold", 20.0}});
TESSERA_SBP_CASE("clamp", [] { return std::vector<Tensor>{uniform({5, 7}, -2, 2, 3)}; },
                 Attrs{{"has_min", true}, {"min", -0.5}, {"has_max", true}, {"max", 0.5}});
TESSERA_SBP_CASE("cast", [] { return std::vector<Tensor>{uniform({5, 7}, -2, 2, 3)}; },
                 Attrs{{"dtype", DType::f32}});

#define BINARY_SBP(name)                                                                \
  TESSERA_SBP_CASE(name, [] { return std::vector<Tensor>{positive({5, 7}, 1), positive({7}, 2)}; }); \
  TESSERA_SBP_CASE(name, [] { return std::vector<Tensor>{positive({4, 1, 3}, 3), positive({5, 3}, 4)}; })
BINARY_SBP("add");
BINARY_SBP("sub");
BINARY_SBP("mul");
BINARY_SBP("div");
TESSERA_SBP_CASE("relu_backward", [] {
  return std::vector<Tensor>{uniform({5, 7}, -2, 2, 1), uniform({5, 7}, -2, 2, 2)};
});
TESSERA_SBP_CASE(
    "gelu_backward",
    [] {
      return std::vector<Tensor>{uniform({5, 7}, -2, 2, 1), uniform({5, 7}, -2, 2, 2)};
    },
    Attrs{{"approximate", std::string("tanh")}});
BINARY_SBP("pow");
BINARY_SBP("maximum");
BINARY_SBP("minimum");
BINARY_SBP("eq");
BINARY_SBP("ne");
BINARY_SBP("lt");
BINARY_SBP("le");
BINARY_SBP("gt");
BINARY_SBP("ge");
TESSERA_SBP_CASE("logical_not", [] { return std::vector<Tensor>{gt(uniform({5, 4}), 0)}; });
TESSERA_SBP_CASE("logical_and",
                 [] { return std::vector<Tensor>{gt(uniform({5, 4}), 0), gt(uniform({4}, -1, 1, 2), 0)}; });
TESSERA_SBP_CASE("logical_or",
                 [] { return std::vector<Tensor>{gt(uniform({5, 4}), 0), gt(uniform({5, 1}, -1, 1, 2), 0)}; });
TESSERA_SBP_CASE("where", [] {
  return std::vector<Tensor>{gt(uniform({5, 4}), 0), uniform({5, 4}, -1, 1, 2), uniform({4}, -1, 1, 3)};
});
TESSERA_SBP_CASE("where", [] {
  return std::vector<Tensor>{gt(uniform({5, 4}), 0), uniform({5, 4}, -1, 1, 2), uniform({5, 4}, -1, 1, 3)};
});

TEST(IntegerWraparound, MatchesPyTorchWithoutUndefinedBehaviour) {
  const int64_t max = std::numeric_limits<int64_t>::max();
  const int64_t min = std::numeric_limits<int64_t>::min();
  auto i64 = [](std::vector<int64_t> values) {
    Shape shape{static_cast<int64_t>(values.size())};
    return Tensor::from_vector<int64_t>(values, shape);
  };
  // Values from PyTorch 1.13: torch.tensor([2**63-1]) + 1, etc.
  EXPECT_EQ(add(i64({max}), i64({1})).to_vector<int64_t>(), std::vector<int64_t>{min});
  EXPECT_EQ(sub(i64({min}), i64({1})).to_vector<int64_t>(), std::vector<int64_t>{max});
  EXPECT_EQ(mul(i64({int64_t{1} << 62, min}), i64({2, 2})).to_vector<int64_t>(),
            (std::vector<int64_t>{min, 0}));
  EXPECT_EQ(neg(i64({min})).to_vector<int64_t>(), std::vector<int64_t>{min});
  EXPECT_EQ(abs(i64({min})).to_vector<int64_t>(), std::vector<int64_t>{min});
  EXPECT_EQ(pow(i64({3}), i64({41})).to_vector<int64_t>(),
            std::vector<int64_t>{-420491770248316829});
  EXPECT_EQ(pow(i64({-1}), i64({min})).to_vector<int64_t>(), std::vector<int64_t>{1});
  // torch.tensor([5], dtype=torch.int32) * 2**31 is tensor([-2147483648]).
  Tensor five = Tensor::from_vector<int32_t>({5}, {1});
  EXPECT_EQ(mul(five, int64_t{1} << 31).to_vector<int32_t>(), std::vector<int32_t>{INT32_MIN});
  EXPECT_EQ(sum(i64({max, 1})).item<int64_t>(), min);
}

TEST(ScalarOperand, IntegersAbove2To53StayExact) {
  // PyTorch: torch.tensor([2**62]) + (2**53 + 1) is tensor([4620693217682128897]),
  // and torch.tensor([2**53]) == 2**53 + 1 is tensor([False]).
  const int64_t odd = (int64_t{1} << 53) + 1;
  Tensor x = Tensor::from_vector<int64_t>({int64_t{1} << 62}, {1});
  EXPECT_EQ(add(x, odd).item<int64_t>(), 4620693217682128897);
  Tensor y = Tensor::from_vector<int64_t>({int64_t{1} << 53}, {1});
  EXPECT_FALSE(eq(y, odd).item<bool>());
  EXPECT_EQ(masked_fill(y, full({1}, true), odd).item<int64_t>(), odd);
  EXPECT_EQ(Scalar(odd).to_int64(), odd);
}

TEST(ScalarBoundsAndBools, FollowPyTorchsResultType) {
  using V = std::vector<Tensor>;
  Tensor ints = Tensor::from_vector<int64_t>({-2, 1, 3}, {3});
  // A floating bound makes the result floating; an integer bound keeps it integral.
  EXPECT_TRUE(matches_torch("torch.clamp(a, 0.5)", {ints},
                            [](const V& v) { return clamp(v[0], 0.5, std::nullopt); }));
  EXPECT_TRUE(matches_torch("torch.clamp(a, max=2)", {ints},
                            [](const V& v) { return clamp(v[0], std::nullopt, 2); }));
  EXPECT_TRUE(matches_torch("torch.clamp_min(a, 1.5)", {ints},
                            [](const V& v) { return clamp_min(v[0], 1.5); }));
  EXPECT_TRUE(matches_torch("torch.clamp(a, 0, 1)", {uniform({4}, -2, 2)},
                            [](const V& v) { return clamp(v[0], 0, 1); }));
  // Bool + bool is logical or, bool * bool logical and; bool - bool raises.
  Tensor p = Tensor::from_vector<int64_t>({0, 1, 0, 1}, {4}).to(DType::boolean);
  Tensor q = Tensor::from_vector<int64_t>({0, 0, 1, 1}, {4}).to(DType::boolean);
  EXPECT_TRUE(matches_torch("(a + b, a * b, torch.add(a, b), torch.mul(a, b))", {p, q},
                            [](const V& v) {
                              return V{v[0] + v[1], v[0] * v[1], add(v[0], v[1]), mul(v[0], v[1])};
                            }));
  EXPECT_TRUE(matches_torch("a - b", {p, q}, [](const V& v) { return sub(v[0], v[1]); }));
  EXPECT_TRUE(matches_torch("a + 1", {p}, [](const V& v) { return add(v[0], 1); }));
}

}  // namespace
}  // namespace tessera::testing
