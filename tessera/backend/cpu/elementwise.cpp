// CPU kernels for the elementwise families (ops/elementwise.cpp). Each op is
// a functor; the loops of elementwise_loops.h handle strides and broadcasting.

#include <algorithm>
#include <cmath>
#include <cstring>
#include <utility>

#include "tessera/backend/cpu/elementwise_loops.h"
#include "tessera/backend/cpu/vec_math.h"
#include "tessera/ops/op.h"
#include "tessera/ops/tile_kernels.h"

namespace tessera::cpu {

namespace {

// ---- unary functors --------------------------------------------------------

// A float's sign bit flips (-0 for 0) and clears (0 for -0, a NaN's too),
// as PyTorch's neg and abs do; integers wrap.
struct Neg {
  explicit Neg(const Attrs&) {}
  template <typename T>
  T operator()(T x) const {
    if constexpr (std::is_floating_point_v<T>)
      return -x;
    else
      return wrapping_neg(x);
  }
};
struct Abs {
  explicit Abs(const Attrs&) {}
  template <typename T> T operator()(T x) const {
    if constexpr (std::is_unsigned_v<T>) return x;
    else if constexpr (std::is_floating_point_v<T>)
      return std::abs(x);
    else return x < 0 ? wrapping_neg(x) : x;  // abs(INT64_MIN) is INT64_MIN, as in PyTorch
  }
};
struct Exp {
  explicit Exp(const Attrs&) {}
  float operator()(float x) const { return fast_exp(x); }
  double operator()(double x) const { return std::exp(x); }
};
struct Log {
  explicit Log(const Attrs&) {}
  template <typename T> T operator()(T x) const { return std::log(x); }
};
struct Sqrt {
  explicit Sqrt(const Attrs&) {}
  template <typename T> T operator()(T x) const { return std::sqrt(x); }
};
struct Rsqrt {
  explicit Rsqrt(const Attrs&) {}
  template <typename T> T operator()(T x) const { return T(1) / std::sqrt(x); }
};
struct Sin {
  explicit Sin(const Attrs&) {}
  template <typename T> T operator()(T x) const { return std::sin(x); }
};
struct Cos {
  explicit Cos(const Attrs&) {}
  template <typename T> T operator()(T x) const { return std::cos(x); }
};
struct Tanh {
  explicit Tanh(const Attrs&) {}
  float operator()(float x) const { return fast_tanh(x); }
  double operator()(double x) const { return std::tanh(x); }
};
struct Sigmoid {
  explicit Sigmoid(const Attrs&) {}
  float operator()(float x) const { return fast_sigmoid(x); }
  double operator()(double x) const { return 1.0 / (1.0 + std::exp(-x)); }
};
struct Relu {
  explicit Relu(const Attrs&) {}
  template <typename T> T operator()(T x) const { return x < T(0) ? T(0) : x; }  // NaN stays
};
struct Erf {
  explicit Erf(const Attrs&) {}
  float operator()(float x) const { return fast_erf(x); }
  double operator()(double x) const { return std::erf(x); }
};
template <bool TanhForm>
struct Gelu {
  explicit Gelu(const Attrs&) {}
  float operator()(float x) const {
    if constexpr (TanhForm) {
      return 0.5f * x * (1.0f + fast_tanh(0.7978845608f * (x + 0.044715f * x * x * x)));
    } else {
      return 0.5f * x * (1.0f + fast_erf(x * 0.7071067812f));
    }
  }
  double operator()(double x) const {
    if constexpr (TanhForm) {
      return 0.5 * x * (1.0 + std::tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)));
    } else {
      return 0.5 * x * (1.0 + std::erf(x * 0.7071067811865476));
    }
  }
};
struct Silu {
  explicit Silu(const Attrs&) {}
  float operator()(float x) const { return x * fast_sigmoid(x); }
  double operator()(double x) const { return x / (1.0 + std::exp(-x)); }
};
struct Softplus {
  double beta, threshold;
  explicit Softplus(const Attrs& attrs) : beta(attrs.f("beta")), threshold(attrs.f("threshold")) {}
  template <typename T> T operator()(T x) const {
    T scaled = x * static_cast<T>(beta);
    return scaled > static_cast<T>(threshold) ? x : std::log1p(std::exp(scaled)) / static_cast<T>(beta);
  }
};
struct Clamp {
  bool has_min, has_max;
  double min, max;
  explicit Clamp(const Attrs& attrs)
      : has_min(attrs.b("has_min")), has_max(attrs.b("has_max")), min(attrs.f("min")), max(attrs.f("max")) {}
  template <typename T> T operator()(T x) const {
    T lo = has_min ? static_cast<T>(min) : x;
    T hi = has_max ? static_cast<T>(max) : x;
    if (x != x) return x;  // NaN stays NaN
    const T low_clamped = x < lo ? lo : x;
    return has_max && low_clamped > hi ? hi : low_clamped;  // max wins where min > max, as PyTorch
  }
};
struct LogicalNot {
  explicit LogicalNot(const Attrs&) {}
  bool operator()(bool x) const { return !x; }
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
  TESSERA_DISPATCH_NUMERIC(ctx.inputs[0].dtype(), ctx.op.name, [&] {
    unary_loop<scalar_t, scalar_t>(ctx.inputs[0], ctx.outputs[0], f);
  });
}

void logical_not_kernel(KernelContext& ctx) {
  unary_loop<bool, bool>(ctx.inputs[0], ctx.outputs[0], LogicalNot(ctx.attrs));
}

#define FLOATS ::tessera::DType::f32, ::tessera::DType::f64
#define NUMERIC FLOATS, ::tessera::DType::i64, ::tessera::DType::i32, ::tessera::DType::u8

TESSERA_REGISTER_KERNEL("neg", cpu, numeric_unary<Neg>, NUMERIC);
TESSERA_REGISTER_KERNEL("abs", cpu, numeric_unary<Abs>, NUMERIC);
TESSERA_REGISTER_KERNEL("relu", cpu, numeric_unary<Relu>, NUMERIC);
TESSERA_REGISTER_KERNEL("clamp", cpu, numeric_unary<Clamp>, NUMERIC);
TESSERA_REGISTER_KERNEL("exp", cpu, floating_unary<Exp>, FLOATS);
TESSERA_REGISTER_KERNEL("log", cpu, floating_unary<Log>, FLOATS);
TESSERA_REGISTER_KERNEL("sqrt", cpu, floating_unary<Sqrt>, FLOATS);
TESSERA_REGISTER_KERNEL("rsqrt", cpu, floating_unary<Rsqrt>, FLOATS);
TESSERA_REGISTER_KERNEL("sin", cpu, floating_unary<Sin>, FLOATS);
TESSERA_REGISTER_KERNEL("cos", cpu, floating_unary<Cos>, FLOATS);
TESSERA_REGISTER_KERNEL("tanh", cpu, floating_unary<Tanh>, FLOATS);
TESSERA_REGISTER_KERNEL("sigmoid", cpu, floating_unary<Sigmoid>, FLOATS);
TESSERA_REGISTER_KERNEL("erf", cpu, floating_unary<Erf>, FLOATS);
// Calls run.template operator()<Form<tanh>>() for the GELU form `attrs`
// names: one functor per form, chosen once per call, keeps the loops
// branch-free (gelu and gelu_backward, their kernels and tiles).
template <template <bool> class Form, typename Run>
void by_gelu_form(const Attrs& attrs, Run&& run) {
  if (attrs.get<std::string>("approximate") == "tanh") {
    run.template operator()<Form<true>>();
  } else {
    run.template operator()<Form<false>>();
  }
}

void gelu_kernel(KernelContext& ctx) {
  by_gelu_form<Gelu>(ctx.attrs, [&]<typename F>() { floating_unary<F>(ctx); });
}

TESSERA_REGISTER_KERNEL("gelu", cpu, gelu_kernel, FLOATS);
TESSERA_REGISTER_KERNEL("silu", cpu, floating_unary<Silu>, FLOATS);
TESSERA_REGISTER_KERNEL("softplus", cpu, floating_unary<Softplus>, FLOATS);
TESSERA_REGISTER_KERNEL("logical_not", cpu, logical_not_kernel, ::tessera::DType::boolean);

// ---- binary functors -------------------------------------------------------

struct Add { template <typename T> T operator()(T a, T b) const { return wrapping_add(a, b); } };
struct Sub { template <typename T> T operator()(T a, T b) const { return wrapping_sub(a, b); } };
struct Mul { template <typename T> T operator()(T a, T b) const { return wrapping_mul(a, b); } };
struct Div { template <typename T> T operator()(T a, T b) const { return a / b; } };
// (grad, relu input) -> grad where the input is positive.
struct ReluGrad {
  template <typename T> T operator()(T g, T y) const { return y > T(0) ? g : T(0); }
};
// (grad, gelu input) -> grad * gelu'(input).
template <bool TanhForm>
struct GeluGrad {
  float operator()(float g, float x) const {
    if constexpr (TanhForm) {
      const float x2 = x * x;
      const float t = fast_tanh(0.7978845608f * (x + 0.044715f * x2 * x));
      const float du = 0.7978845608f * (1.0f + 3.0f * 0.044715f * x2);
      return g * (0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * du);
    } else {
      const float cdf = 0.5f * (1.0f + fast_erf(x * 0.7071067812f));
      const float pdf = 0.3989422804f * fast_exp(-0.5f * x * x);
      return g * (cdf + x * pdf);
    }
  }
  double operator()(double g, double x) const {
    if constexpr (TanhForm) {
      const double x2 = x * x;
      const double t = std::tanh(0.7978845608028654 * (x + 0.044715 * x2 * x));
      const double du = 0.7978845608028654 * (1.0 + 3.0 * 0.044715 * x2);
      return g * (0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * du);
    } else {
      const double cdf = 0.5 * (1.0 + std::erf(x * 0.7071067811865476));
      const double pdf = 0.3989422804014327 * std::exp(-0.5 * x * x);
      return g * (cdf + x * pdf);
    }
  }
};
struct Pow {
  template <typename T> T operator()(T a, T b) const {
    if constexpr (std::is_floating_point_v<T>) {
      return std::pow(a, b);
    } else {
      // Integer power by squaring; negative exponents follow C++ integer
      // division semantics (1/a^|b|), as torch.pow on integers does.
      if (b < 0) return a == 1 ? T(1) : (a == static_cast<T>(-1) ? (b % 2 != 0 ? a : T(1)) : T(0));
      T result = 1, base = a;
      for (auto e = b; e > 0; e >>= 1) {
        if (e & 1) result = wrapping_mul(result, base);
        base = wrapping_mul(base, base);
      }
      return result;
    }
  }
};
// NaN propagates through maximum/minimum, as in PyTorch.
struct Maximum {
  template <typename T> T operator()(T a, T b) const {
    if constexpr (std::is_floating_point_v<T>) {
      if (a != a) return a;
      if (b != b) return b;
    }
    return a > b ? a : b;
  }
};
struct Minimum {
  template <typename T> T operator()(T a, T b) const {
    if constexpr (std::is_floating_point_v<T>) {
      if (a != a) return a;
      if (b != b) return b;
    }
    return a < b ? a : b;
  }
};
struct Eq { template <typename T> bool operator()(T a, T b) const { return a == b; } };
struct Ne { template <typename T> bool operator()(T a, T b) const { return a != b; } };
struct Lt { template <typename T> bool operator()(T a, T b) const { return a < b; } };
struct Le { template <typename T> bool operator()(T a, T b) const { return a <= b; } };
struct Gt { template <typename T> bool operator()(T a, T b) const { return a > b; } };
struct Ge { template <typename T> bool operator()(T a, T b) const { return a >= b; } };
struct And { bool operator()(bool a, bool b) const { return a && b; } };
struct Or { bool operator()(bool a, bool b) const { return a || b; } };

template <typename F>
void numeric_binary(KernelContext& ctx) {
  TESSERA_DISPATCH_NUMERIC(ctx.inputs[0].dtype(), ctx.op.name, [&] {
    binary_loop<scalar_t, scalar_t>(ctx.inputs[0], ctx.inputs[1], ctx.outputs[0], F());
  });
}

template <typename F>
void floating_binary(KernelContext& ctx) {
  TESSERA_DISPATCH_FLOATING(ctx.inputs[0].dtype(), ctx.op.name, [&] {
    binary_loop<scalar_t, scalar_t>(ctx.inputs[0], ctx.inputs[1], ctx.outputs[0], F());
  });
}

template <typename F>
void compare_binary(KernelContext& ctx) {
  DType dtype = ctx.inputs[0].dtype();
  if (dtype == DType::boolean) {
    binary_loop<bool, bool>(ctx.inputs[0], ctx.inputs[1], ctx.outputs[0], F());
    return;
  }
  TESSERA_DISPATCH_NUMERIC(dtype, ctx.op.name, [&] {
    binary_loop<bool, scalar_t>(ctx.inputs[0], ctx.inputs[1], ctx.outputs[0], F());
  });
}

template <typename F>
void logical_binary(KernelContext& ctx) {
  binary_loop<bool, bool>(ctx.inputs[0], ctx.inputs[1], ctx.outputs[0], F());
}

#define COMPARABLE NUMERIC, ::tessera::DType::boolean

TESSERA_REGISTER_KERNEL("add", cpu, numeric_binary<Add>, NUMERIC);
TESSERA_REGISTER_KERNEL("sub", cpu, numeric_binary<Sub>, NUMERIC);
TESSERA_REGISTER_KERNEL("mul", cpu, numeric_binary<Mul>, NUMERIC);
TESSERA_REGISTER_KERNEL("div", cpu, floating_binary<Div>, FLOATS);
TESSERA_REGISTER_KERNEL("relu_backward", cpu, numeric_binary<ReluGrad>, NUMERIC);
void gelu_backward_kernel(KernelContext& ctx) {
  by_gelu_form<GeluGrad>(ctx.attrs, [&]<typename F>() { floating_binary<F>(ctx); });
}
TESSERA_REGISTER_KERNEL("gelu_backward", cpu, gelu_backward_kernel, FLOATS);
TESSERA_REGISTER_KERNEL("pow", cpu, numeric_binary<Pow>, NUMERIC);
TESSERA_REGISTER_KERNEL("maximum", cpu, numeric_binary<Maximum>, NUMERIC);
TESSERA_REGISTER_KERNEL("minimum", cpu, numeric_binary<Minimum>, NUMERIC);
TESSERA_REGISTER_KERNEL("eq", cpu, compare_binary<Eq>, COMPARABLE);
TESSERA_REGISTER_KERNEL("ne", cpu, compare_binary<Ne>, COMPARABLE);
TESSERA_REGISTER_KERNEL("lt", cpu, compare_binary<Lt>, COMPARABLE);
TESSERA_REGISTER_KERNEL("le", cpu, compare_binary<Le>, COMPARABLE);
TESSERA_REGISTER_KERNEL("gt", cpu, compare_binary<Gt>, COMPARABLE);
TESSERA_REGISTER_KERNEL("ge", cpu, compare_binary<Ge>, COMPARABLE);
TESSERA_REGISTER_KERNEL("logical_and", cpu, logical_binary<And>, ::tessera::DType::boolean);
TESSERA_REGISTER_KERNEL("logical_or", cpu, logical_binary<Or>, ::tessera::DType::boolean);

// ---- where, cast, copy -----------------------------------------------------

template <typename T>
void where_loop(const Tensor& condition, const Tensor& a, const Tensor& b, Tensor& out) {
  auto loop = loop_over<4>(out, {condition, a, b});
  T* out_base = storage_ptr<T>(out);
  const bool* c_base = storage_ptr<bool>(condition);
  const T* a_base = storage_ptr<T>(a);
  const T* b_base = storage_ptr<T>(b);
  for_each_run(loop, [&](const std::array<int64_t, 4>& offsets,
                         const std::array<int64_t, 4>& strides, int64_t n) {
    T* po = out_base + offsets[0];
    const bool* pc = c_base + offsets[1];
    const T* pa = a_base + offsets[2];
    const T* pb = b_base + offsets[3];
    for (int64_t i = 0; i < n; ++i) {
      po[i] = pc[i * strides[1]] ? pa[i * strides[2]] : pb[i * strides[3]];
    }
  });
}

void where_kernel(KernelContext& ctx) {
  TESSERA_DISPATCH_ALL(ctx.inputs[1].dtype(), ctx.op.name, [&] {
    where_loop<scalar_t>(ctx.inputs[0], ctx.inputs[1], ctx.inputs[2], ctx.outputs[0]);
  });
}

template <typename To, typename From>
To convert(From value) {
  if constexpr (std::is_same_v<To, bool>) {
    return static_cast<float>(value) != 0.0f;
  } else if constexpr (std::is_same_v<From, BFloat16> || std::is_same_v<From, Half>) {
    return static_cast<To>(static_cast<float>(value));
  } else if constexpr (std::is_same_v<To, BFloat16> || std::is_same_v<To, Half>) {
    return To(static_cast<float>(value));
  } else {
    return static_cast<To>(value);
  }
}

void cast_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.inputs[0];
  Tensor& out = ctx.outputs[0];
  TESSERA_DISPATCH_ALL(x.dtype(), "cast", [&] {
    using From = scalar_t;
    TESSERA_DISPATCH_ALL(out.dtype(), "cast", [&] {
      using To = scalar_t;
      unary_loop<To, From>(x, out, [](From value) { return convert<To, From>(value); });
    });
  });
}

template <size_t Bytes>
struct Word;
template <> struct Word<1> { using type = uint8_t; };
template <> struct Word<2> { using type = uint16_t; };
template <> struct Word<4> { using type = uint32_t; };
template <> struct Word<8> { using type = uint64_t; };

template <size_t Bytes>
void copy_words(const Tensor& x, Tensor& out) {
  using W = typename Word<Bytes>::type;
  unary_loop<W, W>(x, out, [](W value) { return value; });
}

void copy_kernel(KernelContext& ctx) {
  switch (dtype_size(ctx.inputs[0].dtype())) {
    case 1: copy_words<1>(ctx.inputs[0], ctx.outputs[0]); break;
    case 2: copy_words<2>(ctx.inputs[0], ctx.outputs[0]); break;
    case 4: copy_words<4>(ctx.inputs[0], ctx.outputs[0]); break;
    default: copy_words<8>(ctx.inputs[0], ctx.outputs[0]); break;
  }
}

#define ALL_DTYPES                                                                   \
  ::tessera::DType::f32, ::tessera::DType::f64, ::tessera::DType::bf16,             \
      ::tessera::DType::f16, ::tessera::DType::i64, ::tessera::DType::i32,          \
      ::tessera::DType::u8, ::tessera::DType::boolean

TESSERA_REGISTER_KERNEL("where", cpu, where_kernel, ALL_DTYPES);
TESSERA_REGISTER_KERNEL("cast", cpu, cast_kernel, ALL_DTYPES);
TESSERA_REGISTER_KERNEL("copy", cpu, copy_kernel, ALL_DTYPES);

// ---- tile kernels (ops/tile_kernels.h) ---------------------------------------
// The same functors over one flat f32 run, as the contiguous paths above
// run them, so a fused chain gives the unfused ops' bits.

template <typename F>
void unary_tile(const Attrs& attrs, const TileArgs& args) {
  const F f(attrs);
  if (args.scalar[0]) {
    std::fill_n(args.out, args.n, f(args.inputs[0][0]));
  } else if (cpu_has_avx512()) {
    flat_unary_avx512<float, float, F>(f, args.out, args.inputs[0], args.n);
  } else {
    flat_unary<float, float, F>(f, args.out, args.inputs[0], args.n);
  }
}

void gelu_tile(const Attrs& attrs, const TileArgs& args) {
  by_gelu_form<Gelu>(attrs, [&]<typename F>() { unary_tile<F>(attrs, args); });
}

template <typename F>
inline void binary_run(const TileArgs& args) {
  const F f;
  // No __restrict: a graph's memory plan may write the output over an
  // input (same index, elementwise), which restrict would make undefined.
  float* po = args.out;
  const float* pa = args.inputs[0];
  const float* pb = args.inputs[1];
  const int64_t n = args.n;
  if (!args.scalar[0] && !args.scalar[1]) {
    for (int64_t i = 0; i < n; ++i) po[i] = f(pa[i], pb[i]);
  } else if (!args.scalar[0]) {
    const float vb = *pb;
    for (int64_t i = 0; i < n; ++i) po[i] = f(pa[i], vb);
  } else if (!args.scalar[1]) {
    const float va = *pa;
    for (int64_t i = 0; i < n; ++i) po[i] = f(va, pb[i]);
  } else {
    std::fill_n(po, n, f(*pa, *pb));
  }
}

template <typename F>
TESSERA_TARGET_AVX512 void binary_run_avx512(const TileArgs& args) {
  binary_run<F>(args);
}

// The 512-bit copy where the CPU has it: an f32 +, -, * or / rounds the
// same in any vector width, so the values are the unfused loop's.
template <typename F>
void binary_tile(const Attrs&, const TileArgs& args) {
  if (cpu_has_avx512()) {
    binary_run_avx512<F>(args);
  } else {
    binary_run<F>(args);
  }
}

void gelu_backward_tile(const Attrs& attrs, const TileArgs& args) {
  by_gelu_form<GeluGrad>(attrs, [&]<typename F>() { binary_tile<F>(attrs, args); });
}

const bool tile_kernels_registered = [] {
  const std::pair<const char*, TileKernel> kernels[] = {
      {"neg", unary_tile<Neg>},
      {"abs", unary_tile<Abs>},
      {"relu", unary_tile<Relu>},
      {"clamp", unary_tile<Clamp>},
      {"exp", unary_tile<Exp>},
      {"log", unary_tile<Log>},
      {"sqrt", unary_tile<Sqrt>},
      {"rsqrt", unary_tile<Rsqrt>},
      {"sin", unary_tile<Sin>},
      {"cos", unary_tile<Cos>},
      {"tanh", unary_tile<Tanh>},
      {"sigmoid", unary_tile<Sigmoid>},
      {"erf", unary_tile<Erf>},
      {"gelu", gelu_tile},
      {"silu", unary_tile<Silu>},
      {"softplus", unary_tile<Softplus>},
      {"add", binary_tile<Add>},
      {"sub", binary_tile<Sub>},
      {"mul", binary_tile<Mul>},
      {"div", binary_tile<Div>},
      {"pow", binary_tile<Pow>},
      {"maximum", binary_tile<Maximum>},
      {"minimum", binary_tile<Minimum>},
      {"relu_backward", binary_tile<ReluGrad>},
      {"gelu_backward", gelu_backward_tile},
  };
  for (const auto& [op, kernel] : kernels) register_tile_kernel(op, kernel);
  return true;
}();

}  // namespace

}  // namespace tessera::cpu
