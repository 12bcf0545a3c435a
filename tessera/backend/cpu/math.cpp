// CPU kernels for the math family (ops/math.cpp), div's rounding modes and
// clamp with tensor bounds: one functor per op over the loops of
// elementwise_loops.h. Formulas follow PyTorch's CPU kernels, so special
// values (NaN, infinities, signed zeros, division by zero) come out the same.

#include <atomic>
#include <cmath>
#include <limits>

#include "tessera/backend/cpu/elementwise_loops.h"
#include "tessera/backend/cpu/vec_math.h"
#include "tessera/ops/op.h"

namespace tessera::cpu {

namespace {

// ---- unary functors --------------------------------------------------------

struct Erfc {
  explicit Erfc(const Attrs&) {}
  template <typename T> T operator()(T x) const { return std::erfc(x); }
};

// Giles' approximation ("Approximating the erfinv function", 2010), refined
// by two Newton steps in double; near |y| = 1 the residual is taken through
// erfc, whose argument 1 - |y| is exact there.
double erfinv_double(double y) {
  if (y != y || y < -1.0 || y > 1.0) return std::numeric_limits<double>::quiet_NaN();
  if (y == 1.0) return std::numeric_limits<double>::infinity();
  if (y == -1.0) return -std::numeric_limits<double>::infinity();
  const double a = std::fabs(y);
  double w = -std::log((1.0 - a) * (1.0 + a));
  double p;
  if (w < 5.0) {
    w -= 2.5;
    p = 2.81022636e-08;
    p = 3.43273939e-07 + p * w;
    p = -3.5233877e-06 + p * w;
    p = -4.39150654e-06 + p * w;
    p = 0.00021858087 + p * w;
    p = -0.00125372503 + p * w;
    p = -0.00417768164 + p * w;
    p = 0.246640727 + p * w;
    p = 1.50140941 + p * w;
  } else {
    w = std::sqrt(w) - 3.0;
    p = -0.000200214257;
    p = 0.000100950558 + p * w;
    p = 0.00134934322 + p * w;
    p = -0.00367342844 + p * w;
    p = 0.00573950773 + p * w;
    p = -0.0076224613 + p * w;
    p = 0.00943887047 + p * w;
    p = 1.00167406 + p * w;
    p = 2.83297682 + p * w;
  }
  double x = p * a;
  for (int step = 0; step < 2; ++step) {
    const double residual = a > 0.5 ? (1.0 - a) - std::erfc(x) : std::erf(x) - a;
    x -= residual / (1.12837916709551257390 * std::exp(-x * x));
  }
  return y < 0 ? -x : x;
}

struct Erfinv {
  explicit Erfinv(const Attrs&) {}
  template <typename T> T operator()(T x) const { return static_cast<T>(erfinv_double(x)); }
};
struct Log1p {
  explicit Log1p(const Attrs&) {}
  template <typename T> T operator()(T x) const { return std::log1p(x); }
};
struct Expm1 {
  explicit Expm1(const Attrs&) {}
  template <typename T> T operator()(T x) const { return std::expm1(x); }
};
struct Log2 {
  explicit Log2(const Attrs&) {}
  template <typename T> T operator()(T x) const { return std::log2(x); }
};
struct Log10 {
  explicit Log10(const Attrs&) {}
  template <typename T> T operator()(T x) const { return std::log10(x); }
};
struct Exp2 {
  explicit Exp2(const Attrs&) {}
  template <typename T> T operator()(T x) const { return std::exp2(x); }
};
struct Reciprocal {
  explicit Reciprocal(const Attrs&) {}
  template <typename T> T operator()(T x) const { return T(1) / x; }
};

// Rounding leaves integers as they are.
#define TESSERA_ROUNDING_FUNCTOR(Name, fn)                                   \
  struct Name {                                                              \
    explicit Name(const Attrs&) {}                                           \
    template <typename T> T operator()(T x) const {                          \
      if constexpr (std::is_floating_point_v<T>) return fn(x);               \
      else return x;                                                         \
    }                                                                        \
  };
TESSERA_ROUNDING_FUNCTOR(Floor, std::floor)
TESSERA_ROUNDING_FUNCTOR(Ceil, std::ceil)
TESSERA_ROUNDING_FUNCTOR(Trunc, std::trunc)
#undef TESSERA_ROUNDING_FUNCTOR

// Half to even (nearbyint in the default rounding mode); with decimals, as
// PyTorch's round_decimals_kernel, in the tensor's own precision.
struct Round {
  int64_t decimals;
  explicit Round(const Attrs& attrs) : decimals(attrs.i("decimals")) {}
  template <typename T> T operator()(T x) const {
    if constexpr (!std::is_floating_point_v<T>) {
      return x;
    } else {
      if (decimals == 0) return std::nearbyint(x);
      const T scale = static_cast<T>(std::pow(10.0, static_cast<double>(std::abs(decimals))));
      return decimals < 0 ? std::nearbyint(x / scale) * scale : std::nearbyint(x * scale) / scale;
    }
  }
};
struct Frac {
  explicit Frac(const Attrs&) {}
  template <typename T> T operator()(T x) const { return x - std::trunc(x); }
};
struct Sign {
  explicit Sign(const Attrs&) {}
  template <typename T> T operator()(T x) const {
    if constexpr (std::is_same_v<T, bool>) return x;
    else return static_cast<T>((T(0) < x) - (x < T(0)));
  }
};
struct NanToNum {
  double nan, posinf, neginf;
  explicit NanToNum(const Attrs& attrs)
      : nan(attrs.f("nan")), posinf(attrs.f("posinf")), neginf(attrs.f("neginf")) {}
  template <typename T> T operator()(T x) const {
    if constexpr (!std::is_floating_point_v<T>) {
      return x;
    } else {
      if (x != x) return static_cast<T>(nan);
      if (x == std::numeric_limits<T>::infinity()) return static_cast<T>(posinf);
      if (x == -std::numeric_limits<T>::infinity()) return static_cast<T>(neginf);
      return x;
    }
  }
};
struct IsNan {
  template <typename T> bool operator()(T x) const { return x != x; }
};
struct IsInf {
  template <typename T> bool operator()(T x) const {
    if constexpr (std::is_floating_point_v<T>) return std::isinf(x);
    else return false;
  }
};
struct IsFinite {
  template <typename T> bool operator()(T x) const {
    if constexpr (std::is_floating_point_v<T>) return std::isfinite(x);
    else return true;
  }
};

template <typename F>
void floating_unary(KernelContext& ctx) {
  F f(ctx.attrs);
  TESSERA_DISPATCH_FLOATING(ctx.inputs[0].dtype(), ctx.op.name, [&] {
    unary_loop<scalar_t, scalar_t>(ctx.inputs[0], ctx.outputs[0], f);
  });
}

template <typename F>
void numeric_unary(KernelContext& ctx) {
  F f(ctx.attrs);
  if (ctx.inputs[0].dtype() == DType::boolean) {
    if constexpr (std::is_invocable_r_v<bool, F, bool>) {
      unary_loop<bool, bool>(ctx.inputs[0], ctx.outputs[0], f);
      return;
    }
  }
  TESSERA_DISPATCH_NUMERIC(ctx.inputs[0].dtype(), ctx.op.name, [&] {
    unary_loop<scalar_t, scalar_t>(ctx.inputs[0], ctx.outputs[0], f);
  });
}

template <typename F>
void classify(KernelContext& ctx) {
  if (ctx.inputs[0].dtype() == DType::boolean) {
    unary_loop<bool, bool>(ctx.inputs[0], ctx.outputs[0], [](bool x) { return F()(x); });
    return;
  }
  TESSERA_DISPATCH_NUMERIC(ctx.inputs[0].dtype(), ctx.op.name, [&] {
    unary_loop<bool, scalar_t>(ctx.inputs[0], ctx.outputs[0], F());
  });
}

#define FLOATS ::tessera::DType::f32, ::tessera::DType::f64
#define NUMERIC FLOATS, ::tessera::DType::i64, ::tessera::DType::i32, ::tessera::DType::u8

TESSERA_REGISTER_KERNEL("erfc", cpu, floating_unary<Erfc>, FLOATS);
TESSERA_REGISTER_KERNEL("erfinv", cpu, floating_unary<Erfinv>, FLOATS);
TESSERA_REGISTER_KERNEL("log1p", cpu, floating_unary<Log1p>, FLOATS);
TESSERA_REGISTER_KERNEL("expm1", cpu, floating_unary<Expm1>, FLOATS);
TESSERA_REGISTER_KERNEL("log2", cpu, floating_unary<Log2>, FLOATS);
TESSERA_REGISTER_KERNEL("log10", cpu, floating_unary<Log10>, FLOATS);
TESSERA_REGISTER_KERNEL("exp2", cpu, floating_unary<Exp2>, FLOATS);
TESSERA_REGISTER_KERNEL("reciprocal", cpu, floating_unary<Reciprocal>, FLOATS);
TESSERA_REGISTER_KERNEL("floor", cpu, numeric_unary<Floor>, NUMERIC);
TESSERA_REGISTER_KERNEL("ceil", cpu, numeric_unary<Ceil>, NUMERIC);
TESSERA_REGISTER_KERNEL("trunc", cpu, numeric_unary<Trunc>, NUMERIC);
TESSERA_REGISTER_KERNEL("round", cpu, numeric_unary<Round>, NUMERIC);
TESSERA_REGISTER_KERNEL("frac", cpu, floating_unary<Frac>, FLOATS);
TESSERA_REGISTER_KERNEL("sign", cpu, numeric_unary<Sign>, NUMERIC, ::tessera::DType::boolean);
TESSERA_REGISTER_KERNEL("nan_to_num", cpu, numeric_unary<NanToNum>, NUMERIC,
                        ::tessera::DType::boolean);
TESSERA_REGISTER_KERNEL("isnan", cpu, classify<IsNan>, NUMERIC, ::tessera::DType::boolean);
TESSERA_REGISTER_KERNEL("isinf", cpu, classify<IsInf>, NUMERIC, ::tessera::DType::boolean);
TESSERA_REGISTER_KERNEL("isfinite", cpu, classify<IsFinite>, NUMERIC, ::tessera::DType::boolean);

// ---- binary functors -------------------------------------------------------

// Integer division by zero is an error in PyTorch (ZeroDivisionError); the
// loops only note it, and the kernel raises after them.
struct ZeroDivision {
  std::atomic<bool>* seen;
  template <typename T> bool operator()(T b) const {
    if constexpr (std::is_integral_v<T>) {
      if (b == 0) {
        seen->store(true, std::memory_order_relaxed);
        return true;
      }
    }
    (void)b;
    return false;
  }
};

struct Remainder {
  ZeroDivision zero;
  template <typename T> T operator()(T a, T b) const {
    if constexpr (std::is_floating_point_v<T>) {
      T mod = std::fmod(a, b);
      if (mod != 0 && ((b < 0) != (mod < 0))) mod += b;
      return mod;
    } else {
      if (zero(b)) return 0;
      if constexpr (std::is_signed_v<T>) {
        if (b == -1) return 0;
        T r = a % b;
        if (r != 0 && ((r < 0) != (b < 0))) r += b;
        return r;
      } else {
        return a % b;
      }
    }
  }
};
struct Fmod {
  ZeroDivision zero;
  template <typename T> T operator()(T a, T b) const {
    if constexpr (std::is_floating_point_v<T>) {
      return std::fmod(a, b);
    } else {
      if (zero(b)) return 0;
      if constexpr (std::is_signed_v<T>) {
        if (b == -1) return 0;
      }
      return a % b;
    }
  }
};
struct DivTrunc {
  ZeroDivision zero;
  template <typename T> T operator()(T a, T b) const {
    if constexpr (std::is_floating_point_v<T>) {
      return std::trunc(a / b);
    } else {
      if (zero(b)) return 0;
      if constexpr (std::is_signed_v<T>) {
        if (b == -1) return wrapping_neg(a);
      }
      return a / b;
    }
  }
};
// PyTorch's div_floor_floating and div_floor_integer.
struct DivFloor {
  ZeroDivision zero;
  template <typename T> T operator()(T a, T b) const {
    if constexpr (std::is_floating_point_v<T>) {
      if (b == 0) return a / b;
      const T mod = std::fmod(a, b);
      T quotient = (a - mod) / b;
      if (mod != 0 && ((b < 0) != (mod < 0))) quotient -= T(1);
      if (quotient == 0) return std::copysign(T(0), a / b);
      T floored = std::floor(quotient);
      if (quotient - floored > T(0.5)) floored += T(1);
      return floored;
    } else {
      if (zero(b)) return 0;
      if constexpr (std::is_signed_v<T>) {
        if (b == -1) return wrapping_neg(a);
        const T q = a / b;
        const T r = a % b;
        return (r != 0 && ((r < 0) != (b < 0))) ? T(q - 1) : q;
      } else {
        return a / b;
      }
    }
  }
};
struct Atan2 {
  template <typename T> T operator()(T a, T b) const { return std::atan2(a, b); }
};
struct Hypot {
  template <typename T> T operator()(T a, T b) const { return std::hypot(a, b); }
};
struct LogAddExp {
  template <typename T> T operator()(T a, T b) const {
    if (std::isinf(a) && a == b) return a;
    const T m = a > b ? a : b;
    return m + std::log1p(std::exp(-std::abs(a - b)));
  }
};
struct LogAddExp2 {
  template <typename T> T operator()(T a, T b) const {
    if (std::isinf(a) && a == b) return a;
    const T m = a > b ? a : b;
    return m + std::log1p(std::exp2(-std::abs(a - b))) * T(1.44269504088896340736);
  }
};
struct LogicalXor {
  bool operator()(bool a, bool b) const { return a != b; }
};

template <typename F>
void dividing_binary(KernelContext& ctx) {
  std::atomic<bool> zero_division{false};
  F f{ZeroDivision{&zero_division}};
  TESSERA_DISPATCH_NUMERIC(ctx.inputs[0].dtype(), ctx.op.name, [&] {
    binary_loop<scalar_t, scalar_t>(ctx.inputs[0], ctx.inputs[1], ctx.outputs[0], f);
  });
  TESSERA_CHECK(!zero_division.load(), "[", ctx.op.name, "] integer division by zero (",
                dtype_name(ctx.inputs[0].dtype()),
                " divisor with a zero element), which PyTorch rejects too (ZeroDivisionError)");
}

void div_rounding_kernel(KernelContext& ctx) {
  if (ctx.attrs.get<std::string>("rounding_mode") == "floor") {
    dividing_binary<DivFloor>(ctx);
  } else {
    dividing_binary<DivTrunc>(ctx);
  }
}

template <typename F>
void floating_binary(KernelContext& ctx) {
  TESSERA_DISPATCH_FLOATING(ctx.inputs[0].dtype(), ctx.op.name, [&] {
    binary_loop<scalar_t, scalar_t>(ctx.inputs[0], ctx.inputs[1], ctx.outputs[0], F());
  });
}

void logical_xor_kernel(KernelContext& ctx) {
  binary_loop<bool, bool>(ctx.inputs[0], ctx.inputs[1], ctx.outputs[0], LogicalXor());
}

TESSERA_REGISTER_KERNEL("remainder", cpu, dividing_binary<Remainder>, NUMERIC);
TESSERA_REGISTER_KERNEL("fmod", cpu, dividing_binary<Fmod>, NUMERIC);
TESSERA_REGISTER_KERNEL("div_rounding", cpu, div_rounding_kernel, NUMERIC);
TESSERA_REGISTER_KERNEL("atan2", cpu, floating_binary<Atan2>, FLOATS);
TESSERA_REGISTER_KERNEL("hypot", cpu, floating_binary<Hypot>, FLOATS);
TESSERA_REGISTER_KERNEL("logaddexp", cpu, floating_binary<LogAddExp>, FLOATS);
TESSERA_REGISTER_KERNEL("logaddexp2", cpu, floating_binary<LogAddExp2>, FLOATS);
TESSERA_REGISTER_KERNEL("logical_xor", cpu, logical_xor_kernel, ::tessera::DType::boolean);

// ---- clamp with tensor bounds ----------------------------------------------

// min(max(x, low), high), as PyTorch's clamp kernel: a NaN bound gives NaN,
// and high wins where low > high.
template <typename T>
void clamp_loop(const Tensor& x, const Tensor& low, const Tensor& high, Tensor& out) {
  auto loop = loop_over<4>(out, {x, low, high});
  T* out_base = storage_ptr<T>(out);
  const T* x_base = storage_ptr<T>(x);
  const T* low_base = storage_ptr<T>(low);
  const T* high_base = storage_ptr<T>(high);
  for_each_run(loop, [&](const std::array<int64_t, 4>& offsets,
                         const std::array<int64_t, 4>& strides, int64_t n) {
    T* po = out_base + offsets[0];
    const T* px = x_base + offsets[1];
    const T* pl = low_base + offsets[2];
    const T* ph = high_base + offsets[3];
    for (int64_t i = 0; i < n; ++i) {
      const T v = px[i * strides[1]];
      const T lo = pl[i * strides[2]];
      const T hi = ph[i * strides[3]];
      if (lo != lo || hi != hi) {
        po[i] = std::numeric_limits<T>::quiet_NaN();
        continue;
      }
      const T raised = v < lo ? lo : v;
      po[i] = hi < raised ? hi : raised;
    }
  });
}

void clamp_tensor_kernel(KernelContext& ctx) {
  TESSERA_DISPATCH_NUMERIC(ctx.inputs[0].dtype(), ctx.op.name, [&] {
    clamp_loop<scalar_t>(ctx.inputs[0], ctx.inputs[1], ctx.inputs[2], ctx.outputs[0]);
  });
}

TESSERA_REGISTER_KERNEL("clamp_tensor", cpu, clamp_tensor_kernel, NUMERIC);

}  // namespace

}  // namespace tessera::cpu
