// The math family (ops/math.h) and div's rounding modes: public functions,
// inference, SBP signatures and gradients. Kernels: backend/cpu/math.cpp.

#include "tessera/ops/math.h"

#include <cmath>
#include <limits>

#include "tessera/ops/creation.h"
#include "tessera/ops/elementwise.h"
#include "tessera/ops/op.h"
#include "tessera/ops/reduce.h"
#include "tessera/ops/sbp_rules.h"

namespace tessera {

namespace {

constexpr double kLn2 = 0.69314718055994530942;
constexpr double kLn10 = 2.30258509299404568402;
constexpr double kSqrtPiOverTwo = 0.88622692545275801365;
constexpr double kTwoOverSqrtPi = 1.12837916709551257390;

std::vector<SbpSignature> unary_splits(const MetaVector& in, const Attrs&) {
  return broadcast_split_signatures(in, in[0].shape);
}

// Monotone non-decreasing functions of the whole real line commute with max
// and min over ranks.
std::vector<SbpSignature> monotone_signatures(const MetaVector& in, const Attrs& attrs) {
  auto signatures = unary_splits(in, attrs);
  signatures.push_back(uniform_signature(1, 1, Sbp::partial_max()));
  signatures.push_back(uniform_signature(1, 1, Sbp::partial_min()));
  return signatures;
}

OpDef unary_def(const char* name, const char* torch_name, const char* signature, GradFn grad,
                bool monotone = false, bool saves_outputs = false) {
  OpDef def;
  def.name = name;
  def.kind = OpKind::elementwise;
  def.torch_name = torch_name;
  def.signature = signature;
  def.infer = [](const MetaVector& in, const Attrs&) { return MetaVector{in[0]}; };
  def.sbp = monotone ? SbpFn(monotone_signatures) : SbpFn(unary_splits);
  def.grad = std::move(grad);
  def.saves_outputs = saves_outputs;
  return def;
}

// Gradient g * f'(x), with f' written from x (input 0) or the output.
GradFn times(std::function<Tensor(const GradContext&)> derivative) {
  return [derivative](const GradContext& c) {
    return std::vector<Tensor>{mul(c.grad_output(0), derivative(c))};
  };
}

// Piecewise-constant functions: PyTorch's gradient is zero everywhere.
std::vector<Tensor> zero_grad(const GradContext& c) {
  return {zeros_like(c.grad_output(0))};
}

const OpDef& erfc_op = register_op(unary_def(
    "erfc", "torch.erfc", "erfc(x)", times([](const GradContext& c) {
      const Tensor& x = c.input(0);
      return mul(exp(neg(mul(x, x))), -kTwoOverSqrtPi);
    })));
const OpDef& erfinv_op = register_op(unary_def(
    "erfinv", "torch.erfinv", "erfinv(x)", times([](const GradContext& c) {
      const Tensor& y = c.output(0);
      return mul(exp(mul(y, y)), kSqrtPiOverTwo);
    }),
    false, true));
const OpDef& log1p_op = register_op(unary_def(
    "log1p", "torch.log1p", "log1p(x)",
    times([](const GradContext& c) { return reciprocal(add(c.input(0), 1.0)); })));
const OpDef& expm1_op = register_op(unary_def(
    "expm1", "torch.expm1", "expm1(x)",
    times([](const GradContext& c) { return add(c.output(0), 1.0); }), true, true));
const OpDef& log2_op = register_op(unary_def(
    "log2", "torch.log2", "log2(x)",
    times([](const GradContext& c) { return reciprocal(mul(c.input(0), kLn2)); })));
const OpDef& log10_op = register_op(unary_def(
    "log10", "torch.log10", "log10(x)",
    times([](const GradContext& c) { return reciprocal(mul(c.input(0), kLn10)); })));
const OpDef& exp2_op = register_op(unary_def(
    "exp2", "torch.exp2", "exp2(x)", times([](const GradContext& c) { return mul(c.output(0), kLn2); }),
    true, true));
const OpDef& reciprocal_op = register_op(unary_def(
    "reciprocal", "torch.reciprocal", "reciprocal(x)", times([](const GradContext& c) {
      const Tensor& y = c.output(0);
      return neg(mul(y, y));
    }),
    false, true));
const OpDef& floor_op = register_op(unary_def("floor", "torch.floor", "floor(x)", zero_grad, true));
const OpDef& ceil_op = register_op(unary_def("ceil", "torch.ceil", "ceil(x)", zero_grad, true));
const OpDef& trunc_op = register_op(unary_def("trunc", "torch.trunc", "trunc(x)", zero_grad));
const OpDef& round_op =
    register_op(unary_def("round", "torch.round", "round(x, decimals)", zero_grad, true));
const OpDef& frac_op = register_op(unary_def(
    "frac", "torch.frac", "frac(x)",
    [](const GradContext& c) { return std::vector<Tensor>{c.grad_output(0)}; }));
const OpDef& sign_op = register_op(unary_def("sign", "torch.sign", "sign(x)", zero_grad, true));
const OpDef& nan_to_num_op = register_op(unary_def(
    "nan_to_num", "torch.nan_to_num", "nan_to_num(x, nan, posinf, neginf)",
    times([](const GradContext& c) {
      return cast(isfinite(c.input(0)), c.grad_output(0).dtype());
    })));

OpDef predicate_def(const char* name, const char* torch_name, const char* signature) {
  OpDef def;
  def.name = name;
  def.kind = OpKind::elementwise;
  def.torch_name = torch_name;
  def.signature = signature;
  def.differentiable = false;
  def.infer = [](const MetaVector& in, const Attrs&) {
    return MetaVector{{in[0].shape, DType::boolean, in[0].device}};
  };
  def.sbp = unary_splits;
  return def;
}

const OpDef& isnan_op = register_op(predicate_def("isnan", "torch.isnan", "isnan(x)"));
const OpDef& isinf_op = register_op(predicate_def("isinf", "torch.isinf", "isinf(x)"));
const OpDef& isfinite_op = register_op(predicate_def("isfinite", "torch.isfinite", "isfinite(x)"));

Tensor as_floating(const Tensor& x) { return is_floating(x.dtype()) ? x : cast(x, DType::f32); }

void check_defined(const Tensor& x, const char* op) {
  TESSERA_CHECK(x.defined(), "[", op, "] got an undefined tensor");
}

// The one check for functions PyTorch defines on floating inputs only.
void check_floating(DType dtype, const char* op, const char* what = "x") {
  TESSERA_CHECK(is_floating(dtype), "[", op, "] is defined for floating tensors only, got ", what,
                " of dtype ", dtype_name(dtype), "; cast it first (e.g. x.to(DType::f32))");
}

Tensor floating_unary(const OpDef& op, const Tensor& x) {
  check_defined(x, op.name.c_str());
  return call1(op, {as_floating(x)});
}

// Rounding functions: integers are already whole; bool has no rounding.
Tensor rounding_unary(const OpDef& op, const Tensor& x, const Attrs& attrs = {}) {
  check_defined(x, op.name.c_str());
  TESSERA_CHECK(x.dtype() != DType::boolean, "[", op.name,
                "] is not defined for bool tensors; cast to a numeric dtype first");
  return call1(op, {x}, attrs);
}

}  // namespace

Tensor erfc(const Tensor& x) { return floating_unary(erfc_op, x); }
Tensor erfinv(const Tensor& x) { return floating_unary(erfinv_op, x); }
Tensor log1p(const Tensor& x) { return floating_unary(log1p_op, x); }
Tensor expm1(const Tensor& x) { return floating_unary(expm1_op, x); }
Tensor log2(const Tensor& x) { return floating_unary(log2_op, x); }
Tensor log10(const Tensor& x) { return floating_unary(log10_op, x); }
Tensor exp2(const Tensor& x) { return floating_unary(exp2_op, x); }
Tensor reciprocal(const Tensor& x) { return floating_unary(reciprocal_op, x); }
Tensor floor(const Tensor& x) { return rounding_unary(floor_op, x); }
Tensor ceil(const Tensor& x) { return rounding_unary(ceil_op, x); }
Tensor trunc(const Tensor& x) { return rounding_unary(trunc_op, x); }
Tensor round(const Tensor& x, int64_t decimals) {
  check_defined(x, "round");
  if (decimals != 0) check_floating(x.dtype(), "round", "x (with decimals)");
  return rounding_unary(round_op, x, {{"decimals", decimals}});
}
Tensor frac(const Tensor& x) {
  check_defined(x, "frac");
  check_floating(x.dtype(), "frac");
  return call1(frac_op, {x});
}
Tensor sign(const Tensor& x) {
  check_defined(x, "sign");
  return call1(sign_op, {x});
}

Tensor nan_to_num(const Tensor& x, double nan, std::optional<double> posinf,
                  std::optional<double> neginf) {
  check_defined(x, "nan_to_num");
  double largest = std::numeric_limits<double>::max();
  if (x.dtype() == DType::f32) largest = std::numeric_limits<float>::max();
  if (x.dtype() == DType::f16) largest = 65504.0;
  if (x.dtype() == DType::bf16) largest = 3.3895313892515355e38;
  return call1(nan_to_num_op, {x},
               {{"nan", nan}, {"posinf", posinf.value_or(largest)},
                {"neginf", neginf.value_or(-largest)}});
}

Tensor isnan(const Tensor& x) {
  check_defined(x, "isnan");
  return call1(isnan_op, {x});
}
Tensor isinf(const Tensor& x) {
  check_defined(x, "isinf");
  return call1(isinf_op, {x});
}
Tensor isfinite(const Tensor& x) {
  check_defined(x, "isfinite");
  return call1(isfinite_op, {x});
}

// ---------------------------------------------------------------------------
// Binary math.

namespace {

const Sbp kPs = Sbp::partial_sum();
const Sbp kB = Sbp::broadcast();

MetaVector infer_binary(const MetaVector& in, const std::string& name,
                        std::optional<DType> out_dtype = std::nullopt) {
  TESSERA_CHECK(in[0].dtype == in[1].dtype, "[", name, "] inputs must share a dtype after ",
                "promotion, got ", dtype_name(in[0].dtype), " and ", dtype_name(in[1].dtype));
  return {{broadcast_shapes(in[0].shape, in[1].shape, name.c_str()), out_dtype.value_or(in[0].dtype),
           in[0].device}};
}

OpDef binary_def(const char* name, const char* torch_name, const char* signature, GradFn grad,
                 std::vector<SbpSignature> extra = {}) {
  OpDef def;
  def.name = name;
  def.kind = OpKind::elementwise;
  def.torch_name = torch_name;
  def.signature = signature;
  std::string op_name = name;
  def.infer = [op_name](const MetaVector& in, const Attrs&) { return infer_binary(in, op_name); };
  def.sbp = [extra](const MetaVector& in, const Attrs&) {
    auto signatures =
        broadcast_split_signatures(in, broadcast_shapes(in[0].shape, in[1].shape, "sbp"));
    signatures.insert(signatures.end(), extra.begin(), extra.end());
    return signatures;
  };
  def.grad = std::move(grad);
  if (!def.grad) def.differentiable = false;
  return def;
}

// Gradients of both inputs from d(out)/da and d(out)/db, each reduced to its
// input's shape; only the ones needed are computed.
GradFn binary_grad(std::function<Tensor(const GradContext&)> d_a,
                   std::function<Tensor(const GradContext&)> d_b) {
  return [d_a, d_b](const GradContext& c) {
    const Tensor& g = c.grad_output(0);
    std::vector<Tensor> grads(2);
    if (c.needs_input_grad(0)) grads[0] = sum_to(mul(g, d_a(c)), c.input_meta(0).shape);
    if (c.needs_input_grad(1)) grads[1] = sum_to(mul(g, d_b(c)), c.input_meta(1).shape);
    return grads;
  };
}

Tensor one(const GradContext& c) { return ones_like(c.grad_output(0)); }

const OpDef& remainder_op = register_op(binary_def(
    "remainder", "torch.remainder", "remainder(a, b)",
    binary_grad(one, [](const GradContext& c) { return neg(div(c.input(0), c.input(1), "floor")); })));
const OpDef& fmod_op = register_op(binary_def(
    "fmod", "torch.fmod", "fmod(a, b)",
    binary_grad(one, [](const GradContext& c) { return neg(div(c.input(0), c.input(1), "trunc")); })));
const OpDef& atan2_op = register_op(binary_def(
    "atan2", "torch.atan2", "atan2(a, b)",
    binary_grad(
        [](const GradContext& c) {
          const Tensor &a = c.input(0), &b = c.input(1);
          return div(b, add(mul(a, a), mul(b, b)));
        },
        [](const GradContext& c) {
          const Tensor &a = c.input(0), &b = c.input(1);
          return div(neg(a), add(mul(a, a), mul(b, b)));
        })));
const OpDef& hypot_op = [] {
  OpDef def = binary_def(
      "hypot", "torch.hypot", "hypot(a, b)",
      binary_grad([](const GradContext& c) { return div(c.input(0), c.output(0)); },
                  [](const GradContext& c) { return div(c.input(1), c.output(0)); }));
  def.saves_outputs = true;
  return register_op(std::move(def));
}();
const OpDef& logaddexp_op = register_op(binary_def(
    "logaddexp", "torch.logaddexp", "logaddexp(a, b)",
    binary_grad(
        [](const GradContext& c) { return sigmoid(sub(c.input(0), c.input(1))); },
        [](const GradContext& c) { return sigmoid(sub(c.input(1), c.input(0))); })));
const OpDef& logaddexp2_op = register_op(binary_def(
    "logaddexp2", "torch.logaddexp2", "logaddexp2(a, b)",
    binary_grad(
        [](const GradContext& c) { return reciprocal(add(exp2(sub(c.input(1), c.input(0))), 1.0)); },
        [](const GradContext& c) { return reciprocal(add(exp2(sub(c.input(0), c.input(1))), 1.0)); })));
const OpDef& logical_xor_op = [] {
  OpDef def = binary_def("logical_xor", "torch.logical_xor", "logical_xor(a, b)", nullptr);
  def.infer = [](const MetaVector& in, const Attrs&) {
    return infer_binary(in, "logical_xor", DType::boolean);
  };
  return register_op(std::move(def));
}();
// Rounding division; its gradient is zero, as in PyTorch.
const OpDef& div_rounding_op = register_op(binary_def(
    "div_rounding", "torch.div (rounding_mode='trunc' or 'floor'), torch.floor_divide",
    "div(a, b, rounding_mode)", [](const GradContext& c) {
      std::vector<Tensor> grads(2);
      for (size_t i = 0; i < 2; ++i) {
        if (c.needs_input_grad(i)) grads[i] = zeros_for(c.input_meta(i));
      }
      return grads;
    }));

std::pair<Tensor, Tensor> promoted(const Tensor& a, const Tensor& b, const char* op) {
  check_defined(a, op);
  check_defined(b, op);
  DType common = result_type(a, b);
  return {a.to(common), b.to(common)};
}

Tensor numeric_binary(const OpDef& op, const Tensor& a, const Tensor& b) {
  auto [pa, pb] = promoted(a, b, op.name.c_str());
  TESSERA_CHECK(pa.dtype() != DType::boolean, "[", op.name,
                "] is not defined for bool tensors; cast to a numeric dtype first");
  return call1(op, {pa, pb});
}

Tensor floating_binary(const OpDef& op, const Tensor& a, const Tensor& b, bool promote_integers) {
  auto [pa, pb] = promoted(a, b, op.name.c_str());
  if (promote_integers) {
    pa = as_floating(pa);
    pb = as_floating(pb);
  }
  TESSERA_CHECK(is_floating(pa.dtype()), "[", op.name,
                "] is defined for floating tensors only, got ", dtype_name(a.dtype()), " and ",
                dtype_name(b.dtype()), "; cast them first (e.g. a.to(DType::f32))");
  return call1(op, {pa, pb});
}

Tensor scalar_operand(const Tensor& other, Scalar value) {
  return scalar_tensor(value, value.result_dtype(other.dtype()), other);
}

}  // namespace

Tensor remainder(const Tensor& a, const Tensor& b) { return numeric_binary(remainder_op, a, b); }
Tensor remainder(const Tensor& a, Scalar b) { return remainder(a, scalar_operand(a, b)); }
Tensor remainder(Scalar a, const Tensor& b) { return remainder(scalar_operand(b, a), b); }
Tensor fmod(const Tensor& a, const Tensor& b) { return numeric_binary(fmod_op, a, b); }
Tensor fmod(const Tensor& a, Scalar b) { return fmod(a, scalar_operand(a, b)); }
Tensor atan2(const Tensor& a, const Tensor& b) { return floating_binary(atan2_op, a, b, true); }
Tensor hypot(const Tensor& a, const Tensor& b) { return floating_binary(hypot_op, a, b, false); }
Tensor logaddexp(const Tensor& a, const Tensor& b) {
  return floating_binary(logaddexp_op, a, b, false);
}
Tensor logaddexp2(const Tensor& a, const Tensor& b) {
  return floating_binary(logaddexp2_op, a, b, false);
}
Tensor logical_xor(const Tensor& a, const Tensor& b) {
  check_defined(a, "logical_xor");
  check_defined(b, "logical_xor");
  auto as_bool = [](const Tensor& x) { return x.dtype() == DType::boolean ? x : ne(x, 0); };
  return call1(logical_xor_op, {as_bool(a), as_bool(b)});
}

Tensor div(const Tensor& a, const Tensor& b, const std::optional<std::string>& rounding_mode) {
  if (!rounding_mode) return div(a, b);
  TESSERA_CHECK(*rounding_mode == "trunc" || *rounding_mode == "floor", "[div] rounding_mode='",
                *rounding_mode, "' is not valid; use \"trunc\", \"floor\" or none (true division)");
  auto [pa, pb] = promoted(a, b, "div");
  TESSERA_CHECK(pa.dtype() != DType::boolean, "[div] rounding_mode='", *rounding_mode,
                "' is not defined for two bool tensors; cast them to a numeric dtype first");
  return call1(div_rounding_op, {pa, pb}, {{"rounding_mode", *rounding_mode}});
}
Tensor div(const Tensor& a, Scalar b, const std::optional<std::string>& rounding_mode) {
  return div(a, scalar_operand(a, b), rounding_mode);
}

// ---------------------------------------------------------------------------
// Compositions, as in PyTorch's documentation.

namespace {

void check_same_floating(const Tensor& start, const Tensor& other, const char* what) {
  check_floating(start.dtype(), "lerp", "start");
  TESSERA_CHECK(other.dtype() == start.dtype(), "[lerp] expected ", what, " of dtype ",
                dtype_name(start.dtype()), " (start's), got ", dtype_name(other.dtype()));
}

}  // namespace

Tensor lerp(const Tensor& start, const Tensor& end, Scalar weight) {
  check_defined(start, "lerp");
  check_defined(end, "lerp");
  check_same_floating(start, end, "end");
  return add(start, mul(sub(end, start), scalar_tensor(weight, start.dtype(), start)));
}

Tensor lerp(const Tensor& start, const Tensor& end, const Tensor& weight) {
  check_defined(start, "lerp");
  check_defined(end, "lerp");
  check_defined(weight, "lerp");
  check_same_floating(start, end, "end");
  check_same_floating(start, weight, "weight");
  return add(start, mul(weight, sub(end, start)));
}

Tensor addcmul(const Tensor& input, const Tensor& tensor1, const Tensor& tensor2, Scalar value) {
  check_defined(input, "addcmul");
  check_defined(tensor1, "addcmul");
  check_defined(tensor2, "addcmul");
  DType common = result_type({input, tensor1, tensor2});
  Tensor product =
      mul(mul(tensor1.to(common), tensor2.to(common)), scalar_tensor(value, common, input));
  return add(input.to(common), product);
}

Tensor addcdiv(const Tensor& input, const Tensor& tensor1, const Tensor& tensor2, Scalar value) {
  check_defined(input, "addcdiv");
  check_defined(tensor1, "addcdiv");
  check_defined(tensor2, "addcdiv");
  TESSERA_CHECK(is_floating(tensor1.dtype()) || is_floating(tensor2.dtype()),
                "[addcdiv] integer division of tensor1 (", dtype_name(tensor1.dtype()),
                ") by tensor2 (", dtype_name(tensor2.dtype()),
                ") is not supported, as in PyTorch; use input + value * trunc(tensor1 / tensor2) "
                "for the historic behaviour, or cast them to a floating dtype");
  DType common = result_type({input, tensor1, tensor2});
  Tensor quotient = div(tensor1.to(common), tensor2.to(common));
  return add(input.to(common), mul(quotient, scalar_tensor(value, common, input)));
}

}  // namespace tessera
