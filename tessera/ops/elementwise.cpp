// Elementwise op families: the public functions, inference, SBP signatures
// and gradients. Kernels: backend/cpu/elementwise.cpp.

#include "tessera/ops/elementwise.h"

#include <array>
#include <cmath>
#include <cstring>
#include <limits>

#include "tessera/core/grad_mode.h"
#include "tessera/ops/creation.h"
#include "tessera/ops/dispatch.h"
#include "tessera/ops/op.h"
#include "tessera/ops/reduce.h"
#include "tessera/ops/sbp_rules.h"

namespace tessera {

namespace {

MetaVector infer_unary(const MetaVector& in, const Attrs&) {
  return {in[0]};
}

std::vector<SbpSignature> unary_splits(const MetaVector& in, const Attrs&) {
  return broadcast_split_signatures(in, in[0].shape);
}

// Monotone non-decreasing functions defined on the whole real line commute
// with max and min over ranks (log and sqrt do not qualify: another rank's
// smaller partial value may lie outside their domain).
SbpFn monotone_sbp() {
  return [](const MetaVector& in, const Attrs& attrs) {
    auto signatures = unary_splits(in, attrs);
    signatures.push_back(uniform_signature(1, 1, Sbp::partial_max()));
    signatures.push_back(uniform_signature(1, 1, Sbp::partial_min()));
    return signatures;
  };
}

// The op reference's entries (docs/ops.md) for the ops built by the helpers below.
constexpr OpDoc kElementwiseDocs[] = {
    {"neg", "torch.neg", "neg(x), -x"},
    {"abs", "torch.abs", "abs(x)"},
    {"exp", "torch.exp", "exp(x)"},
    {"log", "torch.log", "log(x)"},
    {"sqrt", "torch.sqrt", "sqrt(x)"},
    {"rsqrt", "torch.rsqrt", "rsqrt(x)"},
    {"sin", "torch.sin", "sin(x)"},
    {"cos", "torch.cos", "cos(x)"},
    {"tanh", "torch.tanh", "tanh(x)"},
    {"sigmoid", "torch.sigmoid", "sigmoid(x)"},
    {"relu", "torch.relu", "relu(x)"},
    {"erf", "torch.erf", "erf(x)"},
    {"gelu", "torch.nn.functional.gelu", "gelu(x, approximate)"},
    {"silu", "torch.nn.functional.silu", "silu(x)"},
    {"softplus", "torch.nn.functional.softplus", "softplus(x, beta, threshold)"},
    {"clamp", "torch.clamp", "clamp(x, min, max)"},
    {"add", "torch.add", "add(a, b), add(a, scalar), a + b"},
    {"sub", "torch.sub", "sub(a, b), sub(a, scalar), sub(scalar, b), a - b"},
    {"mul", "torch.mul", "mul(a, b), mul(a, scalar), a * b"},
    {"relu_backward", "internal", "relu_backward(grad, input)"},
    {"gelu_backward", "internal", "gelu_backward(grad, input, approximate)"},
    {"div", "torch.div", "div(a, b), div(a, scalar), div(scalar, b), a / b"},
    {"pow", "torch.pow", "pow(a, b), pow(a, scalar)"},
    {"maximum", "torch.maximum", "maximum(a, b), maximum(a, scalar)"},
    {"minimum", "torch.minimum", "minimum(a, b), minimum(a, scalar)"},
    {"eq", "torch.eq", "eq(a, b), eq(a, scalar)"},
    {"ne", "torch.ne", "ne(a, b), ne(a, scalar)"},
    {"lt", "torch.lt", "lt(a, b), lt(a, scalar)"},
    {"le", "torch.le", "le(a, b), le(a, scalar)"},
    {"gt", "torch.gt", "gt(a, b), gt(a, scalar)"},
    {"ge", "torch.ge", "ge(a, b), ge(a, scalar)"},
    {"logical_not", "torch.logical_not", "logical_not(x)"},
    {"logical_and", "torch.logical_and", "logical_and(a, b)"},
    {"logical_or", "torch.logical_or", "logical_or(a, b)"},
};

OpDef unary_def(const std::string& name, GradFn grad, bool saves_inputs, bool saves_outputs,
                SbpFn sbp = unary_splits) {
  OpDef def;
  def.name = name;
  def.kind = OpKind::elementwise;
  document(def, kElementwiseDocs);
  def.infer = infer_unary;
  def.sbp = std::move(sbp);
  def.grad = std::move(grad);
  def.saves_inputs = saves_inputs;
  def.saves_outputs = saves_outputs;
  return def;
}

Tensor as_floating(const Tensor& x) { return is_floating(x.dtype()) ? x : cast(x, DType::f32); }

constexpr double kInvSqrt2Pi = 0.39894228040143267794;
constexpr double kSqrt2OverPi = 0.79788456080286535588;
constexpr double kTwoOverSqrtPi = 1.12837916709551257390;

const OpDef& neg_op = register_op(unary_def(
    "neg", [](const GradContext& c) { return std::vector<Tensor>{neg(c.grad_output(0))}; }, false,
    false,
    [](const MetaVector& in, const Attrs& attrs) {
      auto signatures = unary_splits(in, attrs);
      signatures.push_back(uniform_signature(1, 1, Sbp::partial_sum()));
      // Negation turns a max into a min and back.
      signatures.push_back({{Sbp::partial_max()}, {Sbp::partial_min()}});
      signatures.push_back({{Sbp::partial_min()}, {Sbp::partial_max()}});
      return signatures;
    }));

const OpDef& abs_op = register_op(unary_def(
    "abs",
    [](const GradContext& c) {
      const Tensor& x = c.input(0);
      Tensor sign = sub(cast(gt(x, 0), x.dtype()), cast(lt(x, 0), x.dtype()));
      return std::vector<Tensor>{mul(c.grad_output(0), sign)};
    },
    true, false));

const OpDef& exp_op = register_op(unary_def(
    "exp", [](const GradContext& c) { return std::vector<Tensor>{mul(c.grad_output(0), c.output(0))}; },
    true, true, monotone_sbp()));

const OpDef& log_op = register_op(unary_def(
    "log", [](const GradContext& c) { return std::vector<Tensor>{div(c.grad_output(0), c.input(0))}; },
    true, false));

const OpDef& sqrt_op = register_op(unary_def(
    "sqrt",
    [](const GradContext& c) {
      return std::vector<Tensor>{div(mul(c.grad_output(0), 0.5), c.output(0))};
    },
    true, true));

const OpDef& rsqrt_op = register_op(unary_def(
    "rsqrt",
    [](const GradContext& c) {
      Tensor out = c.output(0);
      return std::vector<Tensor>{mul(c.grad_output(0), mul(mul(mul(out, out), out), -0.5))};
    },
    true, true));

const OpDef& sin_op = register_op(unary_def(
    "sin", [](const GradContext& c) { return std::vector<Tensor>{mul(c.grad_output(0), cos(c.input(0)))}; },
    true, false));

const OpDef& cos_op = register_op(unary_def(
    "cos",
    [](const GradContext& c) { return std::vector<Tensor>{neg(mul(c.grad_output(0), sin(c.input(0))))}; },
    true, false));

const OpDef& tanh_op = register_op(unary_def(
    "tanh",
    [](const GradContext& c) {
      Tensor out = c.output(0);
      return std::vector<Tensor>{mul(c.grad_output(0), sub(1.0, mul(out, out)))};
    },
    true, true, monotone_sbp()));

const OpDef& sigmoid_op = register_op(unary_def(
    "sigmoid",
    [](const GradContext& c) {
      Tensor out = c.output(0);
      return std::vector<Tensor>{mul(c.grad_output(0), mul(out, sub(1.0, out)))};
    },
    true, true, monotone_sbp()));

const OpDef& relu_op = register_op(unary_def(
    "relu",
    [](const GradContext& c) {
      return std::vector<Tensor>{relu_backward(c.grad_output(0), c.input(0))};
    },
    true, false, monotone_sbp()));

const OpDef& erf_op = register_op(unary_def(
    "erf",
    [](const GradContext& c) {
      const Tensor& x = c.input(0);
      return std::vector<Tensor>{
          mul(c.grad_output(0), mul(exp(neg(mul(x, x))), kTwoOverSqrtPi))};
    },
    true, false, monotone_sbp()));

const OpDef& gelu_op = register_op(unary_def(
    "gelu",
    [](const GradContext& c) {
      return std::vector<Tensor>{
          gelu_backward(c.grad_output(0), c.input(0), c.attrs().get<std::string>("approximate"))};
    },
    true, false));

const OpDef& silu_op = register_op(unary_def(
    "silu",
    [](const GradContext& c) {
      const Tensor& x = c.input(0);
      Tensor s = sigmoid(x);
      return std::vector<Tensor>{
          mul(c.grad_output(0), mul(s, add(mul(x, sub(1.0, s)), 1.0)))};
    },
    true, false));

const OpDef& softplus_op = register_op(unary_def(
    "softplus",
    [](const GradContext& c) {
      const Tensor& x = c.input(0);
      double beta = c.attrs().f("beta");
      Tensor scaled = mul(x, beta);
      Tensor slope = where(gt(scaled, c.attrs().f("threshold")), ones_like(x), sigmoid(scaled));
      return std::vector<Tensor>{mul(c.grad_output(0), slope)};
    },
    true, false, monotone_sbp()));

const OpDef& clamp_op = register_op(unary_def(
    "clamp",
    [](const GradContext& c) {
      const Tensor& x = c.input(0);
      const Attrs& attrs = c.attrs();
      Tensor inside = ones_like(x, DType::boolean);
      if (attrs.b("has_min")) inside = logical_and(inside, ge(x, attrs.f("min")));
      if (attrs.b("has_max")) inside = logical_and(inside, le(x, attrs.f("max")));
      return std::vector<Tensor>{mul(c.grad_output(0), cast(inside, x.dtype()))};
    },
    true, false, monotone_sbp()));

Tensor unary(const OpDef& op, const Tensor& x, const Attrs& attrs = {}) {
  return call1(op, {as_floating(x)}, attrs);
}

}  // namespace

Tensor neg(const Tensor& x) {
  TESSERA_CHECK(x.dtype() != DType::boolean, "[neg] is not defined for bool tensors; use logical_not");
  return call1(neg_op, {x});
}
Tensor abs(const Tensor& x) { return call1(abs_op, {x}); }
Tensor exp(const Tensor& x) { return unary(exp_op, x); }
Tensor log(const Tensor& x) { return unary(log_op, x); }
Tensor sqrt(const Tensor& x) { return unary(sqrt_op, x); }
Tensor rsqrt(const Tensor& x) { return unary(rsqrt_op, x); }
Tensor sin(const Tensor& x) { return unary(sin_op, x); }
Tensor cos(const Tensor& x) { return unary(cos_op, x); }
Tensor tanh(const Tensor& x) { return unary(tanh_op, x); }
Tensor sigmoid(const Tensor& x) { return unary(sigmoid_op, x); }
Tensor relu(const Tensor& x) { return call1(relu_op, {x}); }
Tensor erf(const Tensor& x) { return unary(erf_op, x); }
Tensor gelu(const Tensor& x, const std::string& approximate) {
  TESSERA_CHECK(approximate == "none" || approximate == "tanh", "[gelu] approximate='",
                approximate, "' is not valid; use \"none\" or \"tanh\"");
  return unary(gelu_op, x, {{"approximate", approximate}});
}
Tensor silu(const Tensor& x) { return unary(silu_op, x); }
Tensor softplus(const Tensor& x, double beta, double threshold) {
  TESSERA_CHECK(beta > 0, "[softplus] beta must be positive, got ", beta);
  return unary(softplus_op, x, {{"beta", beta}, {"threshold", threshold}});
}
Tensor square(const Tensor& x) { return mul(x, x); }

Tensor clamp(const Tensor& x, std::optional<Scalar> min, std::optional<Scalar> max) {
  TESSERA_CHECK(x.defined(), "[clamp] got an undefined tensor");
  TESSERA_CHECK(min || max, "[clamp] needs at least one of min and max");
  TESSERA_CHECK(x.dtype() != DType::boolean, "[clamp] is not defined for bool tensors");
  DType dtype = x.dtype();
  if (min) dtype = min->result_dtype(dtype);
  if (max) dtype = max->result_dtype(dtype);
  return call1(clamp_op, {x.to(dtype)},
               {{"has_min", min.has_value()},
                {"min", min ? min->to_double() : 0.0},
                {"has_max", max.has_value()},
                {"max", max ? max->to_double() : 0.0}});
}

// ---------------------------------------------------------------------------
// Binary arithmetic.

namespace {

MetaVector infer_binary(const MetaVector& in, const Attrs&, const char* name) {
  TESSERA_CHECK(in[0].dtype == in[1].dtype, "[", name, "] inputs must share a dtype after ",
                "promotion, got ", dtype_name(in[0].dtype), " and ", dtype_name(in[1].dtype));
  return {{broadcast_shapes(in[0].shape, in[1].shape, name), in[0].dtype, in[0].device}};
}

InferFn binary_infer(const char* name) {
  return [name](const MetaVector& in, const Attrs& attrs) { return infer_binary(in, attrs, name); };
}

SbpFn binary_sbp(std::vector<SbpSignature> extra) {
  return [extra](const MetaVector& in, const Attrs&) {
    auto signatures = broadcast_split_signatures(in, broadcast_shapes(in[0].shape, in[1].shape, "sbp"));
    signatures.insert(signatures.end(), extra.begin(), extra.end());
    return signatures;
  };
}

OpDef binary_def(const char* name, GradFn grad, bool saves_inputs, std::vector<SbpSignature> extra,
                 bool saves_outputs = false) {
  OpDef def;
  def.name = name;
  def.kind = OpKind::elementwise;
  document(def, kElementwiseDocs);
  def.infer = binary_infer(name);
  def.sbp = binary_sbp(std::move(extra));
  def.grad = std::move(grad);
  def.saves_inputs = saves_inputs;
  def.saves_outputs = saves_outputs;
  return def;
}

const Sbp kPs = Sbp::partial_sum();
const Sbp kB = Sbp::broadcast();

Tensor reduce_to(const Tensor& gradient, const TensorMeta& meta) {
  return sum_to(gradient, meta.shape);
}

const OpDef& add_op = register_op(binary_def(
    "add",
    [](const GradContext& c) {
      const Tensor& g = c.grad_output(0);
      return std::vector<Tensor>{reduce_to(g, c.input_meta(0)), reduce_to(g, c.input_meta(1))};
    },
    false, {{{kPs, kPs}, {kPs}}}));

const OpDef& sub_op = register_op(binary_def(
    "sub",
    [](const GradContext& c) {
      const Tensor& g = c.grad_output(0);
      return std::vector<Tensor>{reduce_to(g, c.input_meta(0)),
                                 c.needs_input_grad(1) ? reduce_to(neg(g), c.input_meta(1)) : Tensor()};
    },
    false, {{{kPs, kPs}, {kPs}}}));

const OpDef& mul_op = register_op(binary_def(
    "mul",
    [](const GradContext& c) {
      const Tensor& g = c.grad_output(0);
      std::vector<Tensor> grads(2);
      if (c.needs_input_grad(0)) grads[0] = reduce_to(mul(g, c.input(1)), c.input_meta(0));
      if (c.needs_input_grad(1)) grads[1] = reduce_to(mul(g, c.input(0)), c.input_meta(1));
      return grads;
    },
    true, {{{kPs, kB}, {kPs}}, {{kB, kPs}, {kPs}}}));

// grad where ReLU's input is positive, else 0, in one pass (torch's
// threshold_backward).
// Linear in grad, so a partial grad gives a partial result.
const OpDef& relu_backward_op = register_op(binary_def(
    "relu_backward",
    [](const GradContext& c) {
      std::vector<Tensor> grads(2);
      if (c.needs_input_grad(0)) grads[0] = relu_backward(c.grad_output(0), c.input(1));
      return grads;
    },
    true, {{{kPs, kB}, {kPs}}}));

// gelu'' for gelu_backward's own gradient. Exact form: phi(x) (2 - x^2).
// Tanh form, with u = k (x + c x^3) and t = tanh u:
// (1 - t^2) (u' - x t u'^2 + x u'' / 2).
Tensor gelu_second_derivative(const Tensor& x, const std::string& approximate) {
  Tensor x2 = mul(x, x);
  if (approximate == "tanh") {
    constexpr double kCubic = 0.044715;
    Tensor t = tanh(mul(add(x, mul(mul(x2, x), kCubic)), kSqrt2OverPi));
    Tensor du = mul(add(mul(x2, 3 * kCubic), 1.0), kSqrt2OverPi);
    Tensor d2u = mul(x, 6 * kCubic * kSqrt2OverPi);
    Tensor bracket = add(sub(du, mul(mul(x, t), mul(du, du))), mul(mul(x, d2u), 0.5));
    return mul(sub(1.0, mul(t, t)), bracket);
  }
  Tensor pdf = mul(exp(mul(x2, -0.5)), kInvSqrt2Pi);
  return mul(pdf, sub(2.0, x2));
}

// grad * gelu'(input) in one pass, either form (torch's gelu_backward):
// one kernel and one result instead of the derivative's ten temporaries.
// Linear in grad, so a partial grad gives a partial result.
const OpDef& gelu_backward_op = register_op(binary_def(
    "gelu_backward",
    [](const GradContext& c) {
      const std::string& approximate = c.attrs().get<std::string>("approximate");
      const Tensor& h = c.grad_output(0);
      std::vector<Tensor> grads(2);
      if (c.needs_input_grad(0)) grads[0] = gelu_backward(h, c.input(1), approximate);
      if (c.needs_input_grad(1)) {
        grads[1] = mul(mul(h, c.input(0)), gelu_second_derivative(c.input(1), approximate));
      }
      return grads;
    },
    true, {{{kPs, kB}, {kPs}}}));

const OpDef& div_op = register_op(binary_def(
    "div",
    [](const GradContext& c) {
      const Tensor& g = c.grad_output(0);
      const Tensor& b = c.input(1);
      std::vector<Tensor> grads(2);
      if (c.needs_input_grad(0)) grads[0] = reduce_to(div(g, b), c.input_meta(0));
      if (c.needs_input_grad(1)) {
        grads[1] = reduce_to(neg(div(mul(g, c.input(0)), mul(b, b))), c.input_meta(1));
      }
      return grads;
    },
    true, {{{kPs, kB}, {kPs}}}));

const OpDef& pow_op = register_op(binary_def(
    "pow",
    [](const GradContext& c) {
      const Tensor& g = c.grad_output(0);
      const Tensor& a = c.input(0);
      const Tensor& b = c.input(1);
      std::vector<Tensor> grads(2);
      if (c.needs_input_grad(0)) {
        grads[0] = reduce_to(mul(g, mul(b, pow(a, sub(b, 1.0)))), c.input_meta(0));
      }
      if (c.needs_input_grad(1)) {
        // d/db a^b = a^b log a; taken as 0 where a == 0 (as PyTorch does for b >= 0).
        Tensor log_a = where(eq(a, 0), zeros_like(a), log(a));
        grads[1] = reduce_to(mul(g, mul(c.output(0), log_a)), c.input_meta(1));
      }
      return grads;
    },
    true, {}, true));

// Ties split the gradient evenly, as PyTorch does.
std::vector<Tensor> extremum_grad(const GradContext& c, bool is_max) {
  const Tensor& g = c.grad_output(0);
  const Tensor& a = c.input(0);
  const Tensor& b = c.input(1);
  Tensor a_wins = cast(is_max ? gt(a, b) : lt(a, b), g.dtype());
  Tensor tie = mul(cast(eq(a, b), g.dtype()), 0.5);
  Tensor b_wins = cast(is_max ? lt(a, b) : gt(a, b), g.dtype());
  return {reduce_to(mul(g, add(a_wins, tie)), c.input_meta(0)),
          reduce_to(mul(g, add(b_wins, tie)), c.input_meta(1))};
}

const OpDef& maximum_op = register_op(binary_def(
    "maximum", [](const GradContext& c) { return extremum_grad(c, true); }, true,
    {{{Sbp::partial_max(), Sbp::partial_max()}, {Sbp::partial_max()}}}));

const OpDef& minimum_op = register_op(binary_def(
    "minimum", [](const GradContext& c) { return extremum_grad(c, false); }, true,
    {{{Sbp::partial_min(), Sbp::partial_min()}, {Sbp::partial_min()}}}));

// Casts both operands to their promoted dtype.
std::pair<Tensor, Tensor> promote(const Tensor& a, const Tensor& b) {
  DType common = result_type(a, b);
  return {a.dtype() == common ? a : cast(a, common), b.dtype() == common ? b : cast(b, common)};
}

Tensor binary(const OpDef& op, const Tensor& a, const Tensor& b) {
  TESSERA_CHECK(a.defined() && b.defined(), "[", op.name, "] got an undefined tensor");
  if (a.dtype() == b.dtype()) return call1(op, {a, b});
  auto [pa, pb] = promote(a, b);
  return call1(op, {pa, pb});
}

Tensor scalar_like(const Tensor& a, Scalar value) {
  return scalar_tensor(value, value.result_dtype(a.dtype()), a);
}

int category(DType dtype) { return is_floating(dtype) ? 2 : (is_integral(dtype) ? 1 : 0); }

}  // namespace

namespace {

// PyTorch's three tiers: tensors with dims, then 0-d tensors (Python
// scalars are 0-d tensors here). A lower tier counts only when it raises
// the category of the result.
template <typename Range>
DType result_type_of(const Range& tensors) {
  std::optional<DType> dimensioned, zero_dim;
  for (const Tensor* t : tensors) {
    TESSERA_CHECK(t->defined(), "[result_type] got an undefined tensor");
    std::optional<DType>& tier = t->dim() > 0 ? dimensioned : zero_dim;
    tier = tier ? promote_types(*tier, t->dtype()) : t->dtype();
  }
  if (!dimensioned) return *zero_dim;
  if (!zero_dim || category(*zero_dim) <= category(*dimensioned)) return *dimensioned;
  return *zero_dim;
}

}  // namespace

// Every binary op asks this: no allocation on the two-tensor path.
DType result_type(const Tensor& a, const Tensor& b) {
  return result_type_of(std::array<const Tensor*, 2>{&a, &b});
}

DType result_type(const std::vector<Tensor>& tensors) {
  std::vector<const Tensor*> pointers;
  pointers.reserve(tensors.size());
  for (const Tensor& t : tensors) pointers.push_back(&t);
  return result_type_of(pointers);
}

namespace {

// alpha must not raise the category of an integer or bool result.
void check_alpha(DType common, Scalar alpha, const char* op) {
  TESSERA_CHECK(is_floating(common) || !(!alpha.is_integral() && !alpha.is_bool()), "[", op,
                "] for integral input tensors, alpha must not be a floating point number, got ",
                alpha.to_double());
  TESSERA_CHECK(common == DType::boolean || !alpha.is_bool(), "[", op,
                "] a bool alpha is only supported for bool tensors, got ", dtype_name(common));
}

Tensor scaled(const Tensor& b, DType common, Scalar alpha) {
  Tensor operand = b.to(common);
  if (alpha.to_double() == 1.0 && !alpha.is_bool()) return operand;
  return mul(operand, scalar_tensor(alpha, common, b));
}

}  // namespace

Tensor add(const Tensor& a, const Tensor& b, Scalar alpha) {
  TESSERA_CHECK(a.defined() && b.defined(), "[add] got an undefined tensor");
  DType common = result_type(a, b);
  check_alpha(common, alpha, "add");
  if (common == DType::boolean) return logical_or(a, alpha.to_int64() != 0 ? b : zeros_like(b, DType::boolean));
  return add(a.to(common), scaled(b, common, alpha));
}
Tensor add(const Tensor& a, Scalar b, Scalar alpha) { return add(a, scalar_like(a, b), alpha); }
Tensor sub(const Tensor& a, const Tensor& b, Scalar alpha) {
  TESSERA_CHECK(a.defined() && b.defined(), "[sub] got an undefined tensor");
  DType common = result_type(a, b);
  TESSERA_CHECK(common != DType::boolean, "[sub] subtracting bool tensors is not supported; use ",
                "logical_xor");
  check_alpha(common, alpha, "sub");
  return sub(a.to(common), scaled(b, common, alpha));
}
Tensor sub(const Tensor& a, Scalar b, Scalar alpha) { return sub(a, scalar_like(a, b), alpha); }

namespace {

// Bool operands: add is logical or and mul logical and, as in PyTorch;
// sub has no bool meaning.
bool both_bool(const Tensor& a, const Tensor& b) {
  return a.defined() && b.defined() && result_type(a, b) == DType::boolean;
}

}  // namespace

Tensor add(const Tensor& a, const Tensor& b) {
  return both_bool(a, b) ? logical_or(a, b) : binary(add_op, a, b);
}
Tensor sub(const Tensor& a, const Tensor& b) {
  TESSERA_CHECK(!both_bool(a, b), "[sub] subtracting bool tensors is not supported; use ",
                "logical_xor");
  return binary(sub_op, a, b);
}
Tensor mul(const Tensor& a, const Tensor& b) {
  return both_bool(a, b) ? logical_and(a, b) : binary(mul_op, a, b);
}
Tensor div(const Tensor& a, const Tensor& b) {
  if (!is_floating(a.dtype()) && !is_floating(b.dtype())) {
    return binary(div_op, cast(a, DType::f32), cast(b, DType::f32));
  }
  return binary(div_op, a, b);
}
Tensor pow(const Tensor& a, const Tensor& b) { return binary(pow_op, a, b); }
// On bools the larger is "or", the smaller "and".
Tensor maximum(const Tensor& a, const Tensor& b) {
  return both_bool(a, b) ? logical_or(a, b) : binary(maximum_op, a, b);
}
Tensor minimum(const Tensor& a, const Tensor& b) {
  return both_bool(a, b) ? logical_and(a, b) : binary(minimum_op, a, b);
}
Tensor add(const Tensor& a, Scalar b) { return add(a, scalar_like(a, b)); }
Tensor sub(const Tensor& a, Scalar b) { return sub(a, scalar_like(a, b)); }
Tensor mul(const Tensor& a, Scalar b) { return mul(a, scalar_like(a, b)); }
Tensor div(const Tensor& a, Scalar b) { return div(a, scalar_like(a, b)); }
Tensor pow(const Tensor& a, Scalar b) { return pow(a, scalar_like(a, b)); }
Tensor maximum(const Tensor& a, Scalar b) { return maximum(a, scalar_like(a, b)); }
Tensor minimum(const Tensor& a, Scalar b) { return minimum(a, scalar_like(a, b)); }
Tensor sub(Scalar a, const Tensor& b) { return sub(scalar_like(b, a), b); }
Tensor div(Scalar a, const Tensor& b) { return div(scalar_like(b, a), b); }

Tensor relu_backward(const Tensor& grad, const Tensor& input) {
  TESSERA_CHECK(grad.dtype() == input.dtype() && grad.shape() == input.shape(),
                "[relu_backward] grad ", dtype_name(grad.dtype()), shape_str(grad.shape()),
                " and input ", dtype_name(input.dtype()), shape_str(input.shape()),
                " must have the same dtype and shape");
  return call1(relu_backward_op, {grad, input});
}

Tensor gelu_backward(const Tensor& grad, const Tensor& input, const std::string& approximate) {
  TESSERA_CHECK(approximate == "none" || approximate == "tanh", "[gelu_backward] approximate='",
                approximate, "' is not one of 'none', 'tanh'");
  TESSERA_CHECK(
      grad.dtype() == input.dtype() && grad.shape() == input.shape() && is_floating(input.dtype()),
      "[gelu_backward] grad ", dtype_name(grad.dtype()), shape_str(grad.shape()), " and input ",
      dtype_name(input.dtype()), shape_str(input.shape()),
      " must be floating tensors of the same dtype and shape");
  return call1(gelu_backward_op, {grad, input}, {{"approximate", approximate}});
}

// ---------------------------------------------------------------------------
// Comparisons and logic: bool outputs, no gradient.

namespace {

OpDef predicate_def(const char* name, int arity) {
  OpDef def;
  def.name = name;
  def.kind = OpKind::elementwise;
  document(def, kElementwiseDocs);
  def.differentiable = false;
  def.infer = [name, arity](const MetaVector& in, const Attrs&) {
    if (arity == 1) return MetaVector{{in[0].shape, DType::boolean, in[0].device}};
    auto out = infer_binary(in, {}, name);
    out[0].dtype = DType::boolean;
    return out;
  };
  def.sbp = [](const MetaVector& in, const Attrs&) {
    Shape shape = in[0].shape;
    for (size_t i = 1; i < in.size(); ++i) shape = broadcast_shapes(shape, in[i].shape, "sbp");
    return broadcast_split_signatures(in, shape);
  };
  return def;
}

const OpDef& eq_op = register_op(predicate_def("eq", 2));
const OpDef& ne_op = register_op(predicate_def("ne", 2));
const OpDef& lt_op = register_op(predicate_def("lt", 2));
const OpDef& le_op = register_op(predicate_def("le", 2));
const OpDef& gt_op = register_op(predicate_def("gt", 2));
const OpDef& ge_op = register_op(predicate_def("ge", 2));
const OpDef& logical_not_op = register_op(predicate_def("logical_not", 1));
const OpDef& logical_and_op = register_op(predicate_def("logical_and", 2));
const OpDef& logical_or_op = register_op(predicate_def("logical_or", 2));

Tensor as_bool(const Tensor& x) { return x.dtype() == DType::boolean ? x : ne(x, 0); }

}  // namespace

Tensor eq(const Tensor& a, const Tensor& b) { return binary(eq_op, a, b); }
Tensor ne(const Tensor& a, const Tensor& b) { return binary(ne_op, a, b); }
Tensor lt(const Tensor& a, const Tensor& b) { return binary(lt_op, a, b); }
Tensor le(const Tensor& a, const Tensor& b) { return binary(le_op, a, b); }
Tensor gt(const Tensor& a, const Tensor& b) { return binary(gt_op, a, b); }
Tensor ge(const Tensor& a, const Tensor& b) { return binary(ge_op, a, b); }
Tensor eq(const Tensor& a, Scalar b) { return eq(a, scalar_like(a, b)); }
Tensor ne(const Tensor& a, Scalar b) { return ne(a, scalar_like(a, b)); }
Tensor lt(const Tensor& a, Scalar b) { return lt(a, scalar_like(a, b)); }
Tensor le(const Tensor& a, Scalar b) { return le(a, scalar_like(a, b)); }
Tensor gt(const Tensor& a, Scalar b) { return gt(a, scalar_like(a, b)); }
Tensor ge(const Tensor& a, Scalar b) { return ge(a, scalar_like(a, b)); }
Tensor logical_not(const Tensor& x) { return call1(logical_not_op, {as_bool(x)}); }
Tensor logical_and(const Tensor& a, const Tensor& b) {
  return call1(logical_and_op, {as_bool(a), as_bool(b)});
}
Tensor logical_or(const Tensor& a, const Tensor& b) {
  return call1(logical_or_op, {as_bool(a), as_bool(b)});
}

// ---------------------------------------------------------------------------
// Selection, casts and copies.

namespace {

const OpDef& where_op = register_op([] {
  OpDef def;
  def.name = "where";
  def.kind = OpKind::elementwise;
  def.torch_name = "torch.where, torch.Tensor.masked_fill";
  def.signature = "where(condition, a, b), masked_fill(x, mask, value)";
  def.kernel_dtype_input = 1;
  def.infer = [](const MetaVector& in, const Attrs&) {
    TESSERA_CHECK(in[0].dtype == DType::boolean, "[where] condition must be bool, got ",
                  dtype_name(in[0].dtype));
    TESSERA_CHECK(in[1].dtype == in[2].dtype, "[where] branches must share a dtype after ",
                  "promotion, got ", dtype_name(in[1].dtype), " and ", dtype_name(in[2].dtype));
    Shape shape = broadcast_shapes(broadcast_shapes(in[0].shape, in[1].shape, "where"),
                                   in[2].shape, "where");
    return MetaVector{{shape, in[1].dtype, in[1].device}};
  };
  def.sbp = [](const MetaVector& in, const Attrs&) {
    Shape shape = broadcast_shapes(broadcast_shapes(in[0].shape, in[1].shape, "where"),
                                   in[2].shape, "where");
    auto signatures = broadcast_split_signatures(in, shape);
    // With the same condition everywhere, selecting between partial sums
    // gives the partial sum of the selection.
    signatures.push_back({{kB, kPs, kPs}, {kPs}});
    return signatures;
  };
  def.grad = [](const GradContext& c) {
    const Tensor& g = c.grad_output(0);
    const Tensor& condition = c.input(0);
    Tensor zero = zeros_like(g);
    std::vector<Tensor> grads(3);
    if (c.needs_input_grad(1)) grads[1] = reduce_to(where(condition, g, zero), c.input_meta(1));
    if (c.needs_input_grad(2)) grads[2] = reduce_to(where(condition, zero, g), c.input_meta(2));
    return grads;
  };
  return def;
}());

const OpDef& cast_op = register_op([] {
  OpDef def;
  def.name = "cast";
  def.kind = OpKind::elementwise;
  def.torch_name = "torch.Tensor.to (dtype)";
  def.signature = "cast(x, dtype), x.to(dtype)";
  def.infer = [](const MetaVector& in, const Attrs& attrs) {
    return MetaVector{{in[0].shape, attrs.get<DType>("dtype"), in[0].device}};
  };
  def.sbp = [](const MetaVector& in, const Attrs& attrs) {
    auto signatures = unary_splits(in, attrs);
    // Casting between floating types commutes with sums up to rounding only,
    // so partial signatures are limited to max/min (exact for any dtype).
    signatures.push_back(uniform_signature(1, 1, Sbp::partial_max()));
    signatures.push_back(uniform_signature(1, 1, Sbp::partial_min()));
    return signatures;
  };
  def.saves_inputs = false;
  def.grad = [](const GradContext& c) {
    DType source = c.input_meta(0).dtype;
    if (!is_floating(source)) return std::vector<Tensor>{Tensor()};
    return std::vector<Tensor>{cast(c.grad_output(0), source)};
  };
  return def;
}());

const OpDef& copy_op = register_op([] {
  OpDef def;
  def.name = "copy";
  def.kind = OpKind::elementwise;
  def.torch_name = "torch.clone";
  def.signature = "copy(x), x.clone()";
  def.infer = infer_unary;
  def.sbp = [](const MetaVector& in, const Attrs& attrs) {
    auto signatures = unary_splits(in, attrs);
    for (Sbp partial : {Sbp::partial_sum(), Sbp::partial_max(), Sbp::partial_min()}) {
      signatures.push_back(uniform_signature(1, 1, partial));
    }
    return signatures;
  };
  def.saves_inputs = false;
  def.grad = [](const GradContext& c) { return std::vector<Tensor>{c.grad_output(0)}; };
  return def;
}());

}  // namespace

Tensor where(const Tensor& condition, const Tensor& a, const Tensor& b) {
  TESSERA_CHECK(condition.defined() && a.defined() && b.defined(), "[where] got an undefined tensor");
  TESSERA_CHECK(condition.dtype() == DType::boolean, "[where] condition must be bool, got ",
                dtype_name(condition.dtype()), "; compare first (e.g. gt(x, 0))");
  auto [pa, pb] = promote(a, b);
  return call1(where_op, {condition, pa, pb});
}

Tensor where(const Tensor& condition, const Tensor& a, Scalar b) {
  return where(condition, a, scalar_like(a, b));
}

Tensor masked_fill(const Tensor& x, const Tensor& mask, Scalar value) {
  TESSERA_CHECK(x.defined() && mask.defined(), "[masked_fill] got an undefined tensor");
  return masked_fill(x, mask, scalar_tensor(value, x.dtype(), x));
}

Tensor masked_fill(const Tensor& x, const Tensor& mask, const Tensor& value) {
  TESSERA_CHECK(x.defined() && mask.defined() && value.defined(),
                "[masked_fill] got an undefined tensor");
  TESSERA_CHECK(mask.dtype() == DType::boolean, "[masked_fill] mask must be bool, got ",
                dtype_name(mask.dtype()));
  TESSERA_CHECK(value.dim() == 0, "[masked_fill] value must be a 0-d tensor, got shape ",
                shape_str(value.shape()));
  // The shapes must broadcast (checked here so the error names this op).
  (void)broadcast_shapes(x.shape(), mask.shape(), "masked_fill");
  return where(mask, value.to(x.dtype()), x);
}

namespace {

// clamp with tensor bounds: inputs (x, min, max) of one dtype; an absent
// bound is passed as the dtype's extreme value and gets no gradient.
const OpDef& clamp_tensor_op = register_op([] {
  OpDef def;
  def.name = "clamp_tensor";
  def.kind = OpKind::elementwise;
  def.torch_name = "torch.clamp (tensor min/max), torch.clamp_min, torch.clamp_max";
  def.signature = "clamp(x, min, max), clamp_min(x, min), clamp_max(x, max)";
  def.infer = [](const MetaVector& in, const Attrs&) {
    for (size_t i = 1; i < 3; ++i) {
      TESSERA_CHECK(in[i].dtype == in[0].dtype, "[clamp] bounds must share x's dtype after ",
                    "promotion, got ", dtype_name(in[0].dtype), " and ", dtype_name(in[i].dtype));
    }
    Shape shape = broadcast_shapes(broadcast_shapes(in[0].shape, in[1].shape, "clamp"),
                                   in[2].shape, "clamp");
    return MetaVector{{shape, in[0].dtype, in[0].device}};
  };
  def.sbp = [](const MetaVector& in, const Attrs&) {
    Shape shape = broadcast_shapes(broadcast_shapes(in[0].shape, in[1].shape, "clamp"),
                                   in[2].shape, "clamp");
    return broadcast_split_signatures(in, shape);
  };
  // As PyTorch's clamp_backward and clamp_backward_min_max.
  def.grad = [](const GradContext& c) {
    const Tensor& g = c.grad_output(0);
    const Tensor& x = c.input(0);
    const Tensor& low = c.input(1);
    const Tensor& high = c.input(2);
    Tensor zero = zeros_like(g);
    std::vector<Tensor> grads(3);
    if (c.needs_input_grad(0)) {
      grads[0] = sum_to(where(logical_and(ge(x, low), le(x, high)), g, zero), c.input_meta(0).shape);
    }
    if (c.needs_input_grad(1)) {
      grads[1] = sum_to(where(logical_and(lt(x, low), lt(low, high)), g, zero), c.input_meta(1).shape);
    }
    if (c.needs_input_grad(2)) {
      grads[2] = sum_to(where(logical_or(gt(x, high), lt(high, low)), g, zero), c.input_meta(2).shape);
    }
    return grads;
  };
  return def;
}());

// The bound that never applies: -inf/+inf, or an integer dtype's extreme.
Tensor unbounded(DType dtype, bool upper) {
  double value = upper ? INFINITY : -INFINITY;
  if (dtype == DType::i64) {
    return scalar_tensor(upper ? std::numeric_limits<int64_t>::max()
                               : std::numeric_limits<int64_t>::min(), dtype);
  }
  if (dtype == DType::i32) value = upper ? 2147483647.0 : -2147483648.0;
  if (dtype == DType::u8) value = upper ? 255.0 : 0.0;
  return scalar_tensor(value, dtype);
}

}  // namespace

Tensor clamp(const Tensor& x, const std::optional<Tensor>& min, const std::optional<Tensor>& max) {
  TESSERA_CHECK(x.defined(), "[clamp] got an undefined tensor");
  const bool has_min = min && min->defined();
  const bool has_max = max && max->defined();
  TESSERA_CHECK(has_min || has_max, "[clamp] needs at least one of min and max");
  std::vector<Tensor> operands{x};
  if (has_min) operands.push_back(*min);
  if (has_max) operands.push_back(*max);
  DType common = result_type(operands);
  TESSERA_CHECK(common != DType::boolean, "[clamp] is not defined for bool tensors");
  Tensor low = has_min ? min->to(common) : unbounded(common, false);
  Tensor high = has_max ? max->to(common) : unbounded(common, true);
  return call1(clamp_tensor_op, {x.to(common), low, high});
}

Tensor clamp_min(const Tensor& x, Scalar min) { return clamp(x, min, std::nullopt); }
// PyTorch clamps bool tensors by bool tensors (but not by numbers).
Tensor clamp_min(const Tensor& x, const Tensor& min) {
  return both_bool(x, min) ? maximum(x, min) : clamp(x, min, std::nullopt);
}
Tensor clamp_max(const Tensor& x, Scalar max) { return clamp(x, std::nullopt, max); }
Tensor clamp_max(const Tensor& x, const Tensor& max) {
  return both_bool(x, max) ? minimum(x, max) : clamp(x, std::nullopt, max);
}

Tensor cast(const Tensor& x, DType dtype) { return call1(cast_op, {x}, {{"dtype", dtype}}); }

Tensor copy(const Tensor& x) { return call1(copy_op, {x}); }

Tensor Tensor::to(DType target) const { return target == dtype() ? *this : cast(*this, target); }

Tensor Tensor::contiguous() const { return is_contiguous() ? *this : copy(*this); }

Tensor Tensor::clone() const { return copy(*this); }

namespace {

// dst.copy_(src): writes src (cast to dst's dtype, broadcast to its shape)
// into dst, which is the output. As autograd records it, the value dst had
// gets no gradient; src gets dst's (summed over the dims it was broadcast
// along).
// Function-local statics: Tensor::copy_ may run during another file's
// static initialisation.
const OpDef& copy_into_op() {
  static const OpDef& def = register_op([] {
    OpDef d;
    d.name = "copy_";
    d.kind = OpKind::elementwise;
    d.writes = {0};
    d.infer = [](const MetaVector& in, const Attrs&) {
      const Shape target = broadcast_shapes(in.at(1).shape, in.at(0).shape, "copy_");
      TESSERA_CHECK(target == in[0].shape, "[copy_] source of shape ", shape_str(in[1].shape),
                    " does not broadcast to the destination's shape ", shape_str(in[0].shape));
      return MetaVector{in[0]};
    };
    d.sbp = [](const MetaVector& in, const Attrs&) {
      std::vector<SbpSignature> signatures = broadcast_split_signatures(in, in.at(0).shape);
      // dst_r = src_r on every rank: partial values stay partial, as long as
      // the cast to dst's dtype commutes with the reduction (it does not for
      // a float sum into integers, nor for max into bool).
      const DType dst = in[0].dtype, src = in.at(1).dtype;
      if (dst == src || is_floating(dst)) {
        signatures.push_back(uniform_signature(2, 1, Sbp::partial_sum()));
      }
      if (dst == src || dst != DType::boolean) {
        signatures.push_back(uniform_signature(2, 1, Sbp::partial_max()));
        signatures.push_back(uniform_signature(2, 1, Sbp::partial_min()));
      }
      return signatures;
    };
    d.saves_inputs = false;
    d.grad = [](const GradContext& c) {
      std::vector<Tensor> grads(2);
      if (c.needs_input_grad(0)) grads[0] = zeros_like(c.grad_output(0));
      if (c.needs_input_grad(1)) {
        grads[1] = sum_to(c.grad_output(0), c.input_meta(1).shape).to(c.input_meta(1).dtype);
      }
      return grads;
    };
    d.torch_name = "torch.Tensor.copy_";
    d.signature = "x.copy_(src)";
    return d;
  }());
  return def;
}

// dst.fill_(value): every element of dst set to the value (attrs "value",
// or "int_value" for an exact integer).
const OpDef& fill_op() {
  static const OpDef& def = register_op([] {
    OpDef d;
    d.name = "fill_";
    d.kind = OpKind::elementwise;
    d.writes = {0};
    d.differentiable = false;  // a tracked fill_ is recorded as a copy_ of the value
    d.infer = [](const MetaVector& in, const Attrs&) { return MetaVector{in.at(0)}; };
    d.sbp = [](const MetaVector& in, const Attrs&) {
      return broadcast_split_signatures(in, in.at(0).shape);
    };
    d.torch_name = "torch.Tensor.fill_";
    d.signature = "x.fill_(value)";
    return d;
  }());
  return def;
}

// Registered at load time too, so the op reference lists them.
const bool in_place_ops_registered = (copy_into_op(), fill_op(), true);

// What grad mode allows of an in-place write of `src` into `dst`, as in
// PyTorch. Returns true when autograd must record the write.
bool check_in_place(const Tensor& dst, const Tensor& src, const char* op) {
  if (!grad_enabled()) return false;
  const TensorImpl& t = dst.impl();
  TESSERA_CHECK(!(t.requires_grad && !t.grad_fn), "[", op, "] a leaf tensor that requires grad ",
                "cannot be written in place while grad mode is on; write under NoGradGuard (as ",
                "optimizers do)");
  const TensorImpl* base = t.view_base.get();
  TESSERA_CHECK(!(base && base->requires_grad && !base->grad_fn), "[", op, "] this ",
                shape_str(t.shape), " tensor is a view of a leaf that requires grad (",
                shape_str(base->shape),
                "), and a leaf cannot be written in place while grad "
                "mode is on; write under NoGradGuard (as optimizers do)");
  const bool tracked = t.requires_grad || src.requires_grad() || (base && base->requires_grad);
  if (!tracked) return false;
  TESSERA_CHECK(base == nullptr || (base->global == nullptr &&
                                    base->strides == contiguous_strides(base->shape)),
                "[", op, "] writing in place into a view (", shape_str(t.shape), " of ",
                shape_str(base->shape), ") is recorded by autograd only when the base is a ",
                "contiguous local tensor, and this base has strides ", shape_str(base->strides),
                "; build the new tensor out of place (cat, where, pad) or write under NoGradGuard");
  TESSERA_CHECK(!dst.is_global(), "[", op, "] writing in place into a global tensor is not ",
                "recorded by autograd yet, and the destination or the source requires grad; ",
                "write under NoGradGuard or build the tensor with to_global");
  return is_floating(dst.dtype());
}

// The geometry of a view inside its (contiguous) base, as attributes.
Attrs view_geometry(const Tensor& view, const TensorImpl& base) {
  return {{"shape", view.shape()},
          {"strides", view.strides()},
          {"offset", view.offset() - base.offset}};
}

// The view of `tensor` (contiguous, the base's shape) that `geometry` names.
Tensor geometry_alias(const Tensor& tensor, const Attrs& geometry) {
  return make_alias(tensor, geometry.ints("shape"), geometry.ints("strides"),
                    tensor.offset() + geometry.get<int64_t>("offset"));
}

// PyTorch's CopySlices: view.copy_(src), seen from the view's base. The base's
// old values outside the view keep their gradient; those the view covered get
// none, and `src` gets the gradient of the region it was written to.
const OpDef& copy_into_view_op() {
  static const OpDef def = [] {
    OpDef d;
    d.name = "copy_slices";
    d.kind = OpKind::elementwise;
    d.infer = [](const MetaVector& in, const Attrs&) { return MetaVector{in.at(0)}; };
    d.saves_inputs = false;
    d.grad = [](const GradContext& c) {
      std::vector<Tensor> grads(2);
      const Tensor grad = c.grad_output(0);
      if (c.needs_input_grad(0)) {
        Tensor keep = ones(c.input_meta(0).shape, grad.dtype());
        {
          NoGradGuard no_grad;
          geometry_alias(keep, c.attrs()).fill_(0.0);
        }
        grads[0] = mul(grad, keep);
      }
      if (c.needs_input_grad(1)) {
        Tensor region = geometry_alias(grad.contiguous(), c.attrs()).contiguous();
        grads[1] = sum_to(region, c.input_meta(1).shape).to(c.input_meta(1).dtype);
      }
      return grads;
    };
    return d;
  }();
  return def;
}

// The written view, re-derived from its base after a CopySlices write: its
// gradient lands in the view's region of the base.
const OpDef& view_of_written_base_op() {
  static const OpDef def = [] {
    OpDef d;
    d.name = "as_strided";
    d.kind = OpKind::elementwise;
    d.infer = [](const MetaVector& in, const Attrs& attrs) {
      TensorMeta meta = in.at(0);
      meta.shape = attrs.ints("shape");
      return MetaVector{meta};
    };
    d.saves_inputs = false;
    d.grad = [](const GradContext& c) {
      Tensor grad_base = zeros(c.input_meta(0).shape, c.grad_output(0).dtype());
      {
        NoGradGuard no_grad;
        geometry_alias(grad_base, c.attrs()).copy_(c.grad_output(0));
      }
      return std::vector<Tensor>{grad_base};
    };
    return d;
  }();
  return def;
}

}  // namespace

Tensor& Tensor::copy_(const Tensor& src) {
  TESSERA_CHECK(src.defined(), "[copy_] the source is an undefined tensor");
  const bool record = check_in_place(*this, src, "copy_");
  TESSERA_CHECK(!src.is_global() || is_global(), "[copy_] cannot copy a global tensor (",
                placement_str(src.placement()), ", ", nd_sbp_str(src.nd_sbp()),
                ") into a local one; use src.to_local() or make the destination global");
  {
    NoGradGuard no_grad;
    Tensor source = src;
    if (is_meta() && !src.is_meta()) {
      source = src.to_meta();  // nothing to write; the shapes must still agree
    } else if (!is_global() && src.device() != device() && !(src.is_meta() && mode_active())) {
      // The op runs on one device: the source comes over first. (Under a
      // mode handler, a meta source is a tracer's stand-in for a value: the
      // copy is recorded, not run.)
      source = src.to(device());
    }
    call(copy_into_op(), {*this, source});
  }
  if (record && is_view()) {
    Tensor base(impl().view_base);
    const Attrs geometry = view_geometry(*this, base.impl());
    TensorVector bases{base};
    record_on_tape(copy_into_view_op(), {base, src}, geometry, bases);
    TensorVector views{*this};
    record_on_tape(view_of_written_base_op(), {base}, geometry, views);
  } else if (record) {
    TensorVector outputs{*this};
    record_on_tape(copy_into_op(), {*this, src}, {}, outputs);
  }
  return *this;
}

Tensor& Tensor::fill_(double value) {
  const TensorImpl& t = impl();
  const bool tracked =
      grad_enabled() && (t.requires_grad || (t.view_base && t.view_base->requires_grad));
  // Autograd records a tracked write as a copy_; a partial global layout
  // keeps the value on its first rank only, as copy_ lays it out.
  if (tracked || (is_global() && nd_sbp().any_partial())) {
    return copy_(Tensor::scalar(value, dtype()));
  }
  call(fill_op(), {*this}, {{"value", value}});
  return *this;
}

}  // namespace tessera
