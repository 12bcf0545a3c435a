// Factory ops. They have no tensor inputs, so their only SBP signature is
// all-broadcast (every rank builds the whole tensor); sharded construction
// is the global layer's job. Kernels: backend/cpu/creation.cpp.

#include "tessera/ops/creation.h"

#include <cmath>
#include <string_view>

#include "tessera/ops/dispatch.h"
#include "tessera/ops/layout_attrs.h"
#include "tessera/ops/op.h"

namespace tessera {

namespace {

// Sizes non-negative and the element count within int64.
void check_shape(const Shape& shape, const char* op) {
  checked_numel(shape, op);
}

// The op reference's entries (docs/ops.md) for the ops built by the helpers below.
constexpr OpDoc kCreationDocs[] = {
    {"full", "torch.full, torch.zeros, torch.ones",
     "full(shape, value, dtype), zeros(shape, dtype), ones(shape, dtype)"},
    {"arange", "torch.arange", "arange(end), arange(start, end, step, dtype)"},
    {"linspace", "torch.linspace", "linspace(start, end, steps, dtype)"},
    {"eye", "torch.eye", "eye(n, m, dtype)"},
    {"rand", "torch.rand", "rand(shape, dtype, generator)"},
    {"randn", "torch.randn", "randn(shape, dtype, generator)"},
    {"randint", "torch.randint", "randint(low, high, shape, dtype, generator)"},
};

OpDef factory_def(const char* name) {
  OpDef def;
  def.name = name;
  def.kind = std::string_view(name).starts_with("rand") ? OpKind::random : OpKind::other;
  document(def, kCreationDocs);
  def.differentiable = false;
  def.kernel_dtype_input = -1;
  def.infer = [](const MetaVector&, const Attrs& attrs) {
    return MetaVector{{attrs.ints("shape"), attrs.get<DType>("dtype"), Device{}}};
  };
  return def;
}

const OpDef& full_op = register_op(factory_def("full"));
const OpDef& arange_op = register_op(factory_def("arange"));
const OpDef& linspace_op = register_op(factory_def("linspace"));
const OpDef& eye_op = register_op(factory_def("eye"));
const OpDef& rand_op = register_op(factory_def("rand"));
const OpDef& randn_op = register_op(factory_def("randn"));
const OpDef& randint_op = register_op(factory_def("randint"));

Attrs random_attrs(const Shape& shape, DType dtype, Generator* generator) {
  Generator& gen = generator ? *generator : default_generator();
  uint64_t offset = gen.reserve(static_cast<uint64_t>(numel(shape)));
  return {{"shape", shape},
          {"dtype", dtype},
          {"seed", static_cast<int64_t>(gen.seed())},
          {"offset", static_cast<int64_t>(offset)}};
}

}  // namespace

namespace {

// full's attrs: the value as a double and, for an integer, exactly.
Attrs fill_attrs(const Shape& shape, Scalar value, DType dtype) {
  Attrs attrs{{"shape", shape}, {"dtype", dtype}, {"value", value.to_double()}};
  if (value.is_integral() || value.is_bool()) attrs.set("int_value", value.to_int64());
  return attrs;
}

// PyTorch's rule for filling an integer dtype: the value must be finite and
// in range (an unsigned dtype also takes negatives down to -max, wrapping).
void check_fits(Scalar value, DType dtype, const char* op) {
  if (is_floating(dtype) || dtype == DType::boolean) return;
  const double max = dtype == DType::i64   ? 9223372036854775808.0  // 2^63, exclusive
                     : dtype == DType::i32 ? 2147483648.0
                                           : 256.0;
  const double min = dtype == DType::i64 ? -max : dtype == DType::i32 ? -max : -(max - 1);
  bool fits = value.is_integral() || value.is_bool()
                  ? value.to_int64() >= static_cast<int64_t>(min) &&
                        (dtype == DType::i64 || value.to_int64() < static_cast<int64_t>(max))
                  : value.to_double() >= min && value.to_double() < max;
  TESSERA_CHECK(fits, "[", op, "] value ", value.to_double(), " cannot be converted to ",
                dtype_name(dtype), " without overflow; valid: finite values in [", min, ", ", max,
                ")");
}

}  // namespace

Tensor full(const Shape& shape, Scalar value, std::optional<DType> dtype) {
  check_shape(shape, "full");
  DType resolved = dtype.value_or(value.is_bool()       ? DType::boolean
                                  : value.is_integral() ? DType::i64
                                                        : DType::f32);
  check_fits(value, resolved, "full");
  return call1(full_op, {}, fill_attrs(shape, value, resolved));
}

Tensor full(const Shape& shape, Scalar value, const Placement& placement, const NdSbp& sbp,
            std::optional<DType> dtype) {
  check_shape(shape, "full");
  DType resolved = dtype.value_or(value.is_bool()       ? DType::boolean
                                  : value.is_integral() ? DType::i64
                                                        : DType::f32);
  check_fits(value, resolved, "full");
  Attrs attrs = fill_attrs(shape, value, resolved);
  set_layout_attrs(attrs, placement, sbp);
  return call1(full_op, {}, attrs);
}

Tensor zeros(const Shape& shape, const Placement& placement, const NdSbp& sbp, DType dtype) {
  return full(shape, 0.0, placement, sbp, dtype);
}

Tensor ones(const Shape& shape, const Placement& placement, const NdSbp& sbp, DType dtype) {
  return full(shape, 1.0, placement, sbp, dtype);
}

Tensor scalar_tensor(Scalar value, DType dtype) {
  return call1(full_op, {}, fill_attrs({}, value, dtype));
}

Tensor scalar_tensor(Scalar value, DType dtype, const Tensor& like) {
  Tensor number = scalar_tensor(value, dtype);
  const bool on_cuda =
      like.defined() && !like.is_global() && like.device().type == DeviceType::cuda;
  return on_cuda ? number.to(like.device()) : number;
}

Tensor zeros(const Shape& shape, DType dtype) { return full(shape, 0.0, dtype); }
Tensor ones(const Shape& shape, DType dtype) { return full(shape, 1.0, dtype); }
Tensor zeros_for(const TensorMeta& meta, std::optional<DType> dtype) {
  if (meta.is_global()) return full(meta.shape, 0.0, meta.placement, meta.sbp, dtype.value_or(meta.dtype));
  return zeros(meta.shape, dtype.value_or(meta.dtype));
}

Tensor zeros_like(const Tensor& x, std::optional<DType> dtype) {
  return full_like(x, 0.0, dtype);
}
Tensor ones_like(const Tensor& x, std::optional<DType> dtype) {
  return full_like(x, 1.0, dtype);
}
Tensor full_like(const Tensor& x, Scalar value, std::optional<DType> dtype) {
  const DType resolved = dtype.value_or(x.dtype());
  if (x.is_meta() && !x.is_global() && mode_active()) {
    // Under a mode handler (a graph trace), x stands for a tensor on the
    // CPU and the fill is an op call like any other, so the handler sees
    // the tensor it makes.
    return full(x.shape(), value, resolved);
  }
  if (x.is_meta()) {  // same shape and layout, no values
    return x.is_global() ? make_global_meta(x.shape(), resolved, x.placement(), x.nd_sbp())
                         : Tensor::empty(x.shape(), resolved, Device::meta());
  }
  if (x.is_global()) return full(x.shape(), value, x.placement(), x.nd_sbp(), resolved);
  Tensor out = full(x.shape(), value, resolved);
  return x.device().type == DeviceType::cpu ? out : out.to(x.device());
}
Tensor empty_like(const Tensor& x) {
  if (x.is_global()) return zeros_like(x);
  return Tensor::empty(x.shape(), x.dtype(), x.device());
}

Tensor arange(Scalar end) { return arange(0, end, 1); }

Tensor arange(Scalar start, Scalar end, Scalar step, std::optional<DType> dtype) {
  // Integer dtypes follow PyTorch: i64 truncates each bound first
  // (arange(0.0, -8.000001, -4.0, dtype=int64) is [0, -4]); the others count
  // with the bounds as given ([0, -4, -8] with dtype=int32), then step from
  // the truncated start by the truncated step, wrapping in the dtype (u8
  // from -1 gives 255).
  const bool narrow_integer = dtype && is_integral(*dtype) && *dtype != DType::i64;
  if (dtype && !is_floating(*dtype)) {
    for (const Scalar& bound : {start, end, step}) {
      TESSERA_CHECK(std::isfinite(bound.to_double()), "[arange] bounds must be finite for dtype ",
                    dtype_name(*dtype), ", got start ", start.to_double(), ", end ",
                    end.to_double(), ", step ", step.to_double());
    }
  }
  if (dtype == DType::i64) {
    start = start.truncated();
    end = end.truncated();
    step = step.truncated();
  }
  TESSERA_CHECK(step.to_double() != 0, "[arange] step must be non-zero");
  double span = (end.to_double() - start.to_double()) / step.to_double();
  TESSERA_CHECK(span >= 0, "[arange] step ", step.to_double(), " does not move from ",
                start.to_double(), " towards ", end.to_double());
  bool integral = start.is_integral() && end.is_integral() && step.is_integral();
  DType resolved = dtype.value_or(integral ? DType::i64 : DType::f32);
  auto count = static_cast<int64_t>(std::ceil(span));
  if (narrow_integer) {
    TESSERA_CHECK(step.truncated().to_int64() != 0, "[arange] step ", step.to_double(),
                  " truncates to 0 for dtype ", dtype_name(*dtype));
    return call1(arange_op, {},
                 {{"shape", Shape{count}},
                  {"dtype", DType::i64},
                  {"start", static_cast<double>(start.truncated().to_int64())},
                  {"step", static_cast<double>(step.truncated().to_int64())}})
        .to(*dtype);
  }
  return call1(arange_op, {},
               {{"shape", Shape{count}},
                {"dtype", resolved},
                {"start", start.to_double()},
                {"step", step.to_double()}});
}

Tensor linspace(double start, double end, int64_t steps, DType dtype) {
  TESSERA_CHECK(steps >= 0, "[linspace] steps must be non-negative, got ", steps);
  return call1(linspace_op, {},
               {{"shape", Shape{steps}}, {"dtype", dtype}, {"start", start}, {"end", end}});
}

Tensor eye(int64_t n, std::optional<int64_t> m, DType dtype) {
  int64_t cols = m.value_or(n);
  TESSERA_CHECK(n >= 0 && cols >= 0, "[eye] sizes must be non-negative, got ", n, " x ", cols);
  check_shape({n, cols}, "eye");
  return call1(eye_op, {}, {{"shape", Shape{n, cols}}, {"dtype", dtype}});
}

namespace {

// rand or randn; global when given a layout.
Tensor draw(const OpDef& op, const Shape& shape, DType dtype, Generator* generator,
            const Placement* placement = nullptr, const NdSbp* sbp = nullptr) {
  check_shape(shape, op.name.c_str());
  TESSERA_CHECK(is_floating(dtype), "[", op.name, "] needs a floating dtype, got ",
                dtype_name(dtype));
  Attrs attrs = random_attrs(shape, dtype, generator);
  if (placement != nullptr) set_layout_attrs(attrs, *placement, *sbp);
  return call1(op, {}, attrs);
}

}  // namespace

Tensor rand(const Shape& shape, DType dtype, Generator* generator) {
  return draw(rand_op, shape, dtype, generator);
}

Tensor randn(const Shape& shape, DType dtype, Generator* generator) {
  return draw(randn_op, shape, dtype, generator);
}

Tensor rand(const Shape& shape, const Placement& placement, const NdSbp& sbp, DType dtype,
            Generator* generator) {
  return draw(rand_op, shape, dtype, generator, &placement, &sbp);
}

Tensor randn(const Shape& shape, const Placement& placement, const NdSbp& sbp, DType dtype,
             Generator* generator) {
  return draw(randn_op, shape, dtype, generator, &placement, &sbp);
}

Tensor randint(int64_t low, int64_t high, const Shape& shape, DType dtype, Generator* generator) {
  check_shape(shape, "randint");
  TESSERA_CHECK(low < high, "[randint] needs low < high, got [", low, ", ", high, ")");
  Attrs attrs = random_attrs(shape, dtype, generator);
  attrs.set("low", low).set("high", high);
  return call1(randint_op, {}, attrs);
}

namespace {

// random_attrs for the box [start, start + size) of a `shape` tensor.
Attrs region_attrs(const char* op, const Shape& shape, const std::vector<int64_t>& start,
                   const Shape& size, DType dtype, Generator* generator) {
  check_shape(shape, op);
  check_shape(size, op);
  bool inside = start.size() == shape.size() && size.size() == shape.size();
  for (size_t d = 0; inside && d < shape.size(); ++d) {
    inside = start[d] >= 0 && start[d] <= shape[d] && size[d] <= shape[d] - start[d];
  }
  TESSERA_CHECK(inside, "[", op, "] region starting at ", shape_str(start), " of size ",
                shape_str(size), " is not inside shape ", shape_str(shape));
  TESSERA_CHECK(is_floating(dtype), "[", op, "] needs a floating dtype, got ", dtype_name(dtype));
  Attrs attrs = random_attrs(shape, dtype, generator);
  attrs.set("shape", size).set("logical_shape", shape).set("region_start", start);
  return attrs;
}

}  // namespace

Tensor rand_region(const Shape& shape, const std::vector<int64_t>& start, const Shape& size,
                   DType dtype, Generator* generator) {
  return call1(rand_op, {}, region_attrs("rand_region", shape, start, size, dtype, generator));
}

Tensor randn_region(const Shape& shape, const std::vector<int64_t>& start, const Shape& size,
                    DType dtype, Generator* generator) {
  return call1(randn_op, {}, region_attrs("randn_region", shape, start, size, dtype, generator));
}

Tensor rand_like(const Tensor& x, Generator* generator) {
  if (x.is_global()) return rand(x.shape(), x.placement(), x.nd_sbp(), x.dtype(), generator);
  return rand(x.shape(), x.dtype(), generator);
}
Tensor randn_like(const Tensor& x, Generator* generator) {
  if (x.is_global()) return randn(x.shape(), x.placement(), x.nd_sbp(), x.dtype(), generator);
  return randn(x.shape(), x.dtype(), generator);
}
Tensor randint_like(const Tensor& x, int64_t low, int64_t high, Generator* generator) {
  return randint(low, high, x.shape(), x.dtype(), generator);
}

}  // namespace tessera
