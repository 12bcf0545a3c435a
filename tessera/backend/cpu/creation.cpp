// CPU kernels for the factory ops (ops/creation.cpp).

#include <cmath>
#include <limits>
#include <vector>

#include "tessera/backend/cpu/loops.h"
#include "tessera/core/rng.h"
#include "tessera/core/shape.h"
#include "tessera/ops/op.h"

namespace tessera::cpu {

namespace {

// A double converted to T without undefined behaviour: for an integer T,
// NaN gives 0 and out-of-range values saturate (the public ops reject those
// before they get here; this keeps the kernels defined regardless).
template <typename T>
T from_double(double value) {
  if constexpr (std::is_same_v<T, BFloat16> || std::is_same_v<T, Half>) {
    return T(static_cast<float>(value));
  } else if constexpr (std::is_same_v<T, bool>) {
    return value != 0;
  } else if constexpr (std::is_integral_v<T>) {
    if (std::isnan(value)) return T(0);
    // Both bounds are powers of two (or 0), so exactly representable in double.
    constexpr double lowest = static_cast<double>(std::numeric_limits<T>::lowest());
    constexpr double past_max = static_cast<double>(std::numeric_limits<T>::max() / 2 + 1) * 2;
    if (value < lowest) return std::numeric_limits<T>::lowest();
    if (value >= past_max) return std::numeric_limits<T>::max();
    return static_cast<T>(value);
  } else {
    return static_cast<T>(value);
  }
}

// An exact integer converted to T: integer dtypes wrap (modular, defined
// since C++20), floating ones round.
template <typename T>
T from_int64(int64_t value) {
  if constexpr (std::is_same_v<T, BFloat16> || std::is_same_v<T, Half>) {
    return T(static_cast<float>(value));
  } else {
    return static_cast<T>(value);
  }
}

void full_kernel(KernelContext& ctx) {
  Tensor& out = ctx.outputs[0];
  double value = ctx.attrs.f("value");
  const bool exact = ctx.attrs.has("int_value");
  TESSERA_DISPATCH_ALL(out.dtype(), "full", [&] {
    scalar_t fill =
        exact ? from_int64<scalar_t>(ctx.attrs.i("int_value")) : from_double<scalar_t>(value);
    scalar_t* data = out.data<scalar_t>();
    parallel_for(0, out.numel(), kElementwiseGrain, [&](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i) data[i] = fill;
    });
  });
}

void arange_kernel(KernelContext& ctx) {
  Tensor& out = ctx.outputs[0];
  double start = ctx.attrs.f("start"), step = ctx.attrs.f("step");
  TESSERA_DISPATCH_ALL(out.dtype(), "arange", [&] {
    scalar_t* data = out.data<scalar_t>();
    for (int64_t i = 0; i < out.numel(); ++i) data[i] = from_double<scalar_t>(start + step * i);
  });
}

void linspace_kernel(KernelContext& ctx) {
  Tensor& out = ctx.outputs[0];
  double start = ctx.attrs.f("start"), end = ctx.attrs.f("end");
  int64_t steps = out.numel();
  double step = steps > 1 ? (end - start) / static_cast<double>(steps - 1) : 0.0;
  TESSERA_DISPATCH_ALL(out.dtype(), "linspace", [&] {
    scalar_t* data = out.data<scalar_t>();
    // Fill from both ends so the last value is exactly `end`, as PyTorch does.
    int64_t half = steps / 2;
    for (int64_t i = 0; i < steps; ++i) {
      double value = (i < half || steps == 1) ? start + step * i : end - step * (steps - 1 - i);
      data[i] = from_double<scalar_t>(value);
    }
  });
}

void eye_kernel(KernelContext& ctx) {
  Tensor& out = ctx.outputs[0];
  int64_t rows = out.shape()[0], cols = out.shape()[1];
  TESSERA_DISPATCH_ALL(out.dtype(), "eye", [&] {
    scalar_t* data = out.data<scalar_t>();
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t c = 0; c < cols; ++c) data[r * cols + c] = from_double<scalar_t>(r == c ? 1.0 : 0.0);
    }
  });
}

// Element i of a random tensor uses Philox counter i only (one block per
// element), so any shard can generate its slice without the rest: with the
// attrs "logical_shape" and "region_start", `out` is the box of that shape
// starting there, and each element uses its logical index's counter.
template <typename F>
void fill_random(Tensor& out, const Attrs& attrs, const F& sample) {
  auto seed = static_cast<uint64_t>(attrs.i("seed"));
  auto offset = static_cast<uint64_t>(attrs.i("offset"));
  const bool region = attrs.has("region_start");
  const Shape& size = out.shape();
  std::vector<int64_t> start, logical_strides;
  if (region) {
    start = attrs.ints("region_start");
    logical_strides = contiguous_strides(attrs.ints("logical_shape"));
  }
  // The logical index of element i of the box (row-major in both).
  auto logical_index = [&](int64_t i) {
    int64_t index = 0;
    for (size_t d = size.size(); d-- > 0;) {
      index += (start[d] + i % size[d]) * logical_strides[d];
      i /= size[d];
    }
    return index;
  };
  TESSERA_DISPATCH_ALL(out.dtype(), "random", [&] {
    scalar_t* data = out.data<scalar_t>();
    parallel_for(0, out.numel(), 4096, [&](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i) {
        const int64_t counter = region ? logical_index(i) : i;
        auto words = Philox::block(seed, offset, static_cast<uint64_t>(counter));
        const auto value = sample(words);
        if constexpr (std::is_same_v<decltype(value), const int64_t>) {
          data[i] = from_int64<scalar_t>(value);
        } else {
          data[i] = from_double<scalar_t>(value);
        }
      }
    });
  });
}

void rand_kernel(KernelContext& ctx) {
  bool wide = ctx.outputs[0].dtype() == DType::f64;
  fill_random(ctx.outputs[0], ctx.attrs, [wide](const std::array<uint32_t, 4>& w) {
    return wide ? Philox::to_unit_double(w[0], w[1]) : static_cast<double>(Philox::to_unit_float(w[0]));
  });
}

void randn_kernel(KernelContext& ctx) {
  fill_random(ctx.outputs[0], ctx.attrs, [](const std::array<uint32_t, 4>& w) {
    // Box-Muller; u1 in (0, 1] so the log is finite.
    double u1 = 1.0 - Philox::to_unit_double(w[0], w[1]);
    double u2 = Philox::to_unit_double(w[2], w[3]);
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2);
  });
}

void randint_kernel(KernelContext& ctx) {
  // In uint64: high - low and low + draw may exceed int64 (randint(INT64_MIN,
  // INT64_MAX)); the result is cast back, which is modular and defined. The
  // draw stays an integer so values above 2^53 are exact.
  const auto low = static_cast<uint64_t>(ctx.attrs.i("low"));
  const uint64_t range = static_cast<uint64_t>(ctx.attrs.i("high")) - low;
  fill_random(ctx.outputs[0], ctx.attrs, [low, range](const std::array<uint32_t, 4>& w) {
    uint64_t bits = (static_cast<uint64_t>(w[0]) << 32) | w[1];
    return static_cast<int64_t>(low + bits % range);
  });
}

#define ALL_DTYPES                                                                   \
  ::tessera::DType::f32, ::tessera::DType::f64, ::tessera::DType::bf16,             \
      ::tessera::DType::f16, ::tessera::DType::i64, ::tessera::DType::i32,          \
      ::tessera::DType::u8, ::tessera::DType::boolean

TESSERA_REGISTER_KERNEL("full", cpu, full_kernel, ALL_DTYPES);
TESSERA_REGISTER_KERNEL("arange", cpu, arange_kernel, ALL_DTYPES);
TESSERA_REGISTER_KERNEL("linspace", cpu, linspace_kernel, ALL_DTYPES);
TESSERA_REGISTER_KERNEL("eye", cpu, eye_kernel, ALL_DTYPES);
TESSERA_REGISTER_KERNEL("rand", cpu, rand_kernel, ::tessera::DType::f32, ::tessera::DType::f64,
                        ::tessera::DType::bf16, ::tessera::DType::f16);
TESSERA_REGISTER_KERNEL("randn", cpu, randn_kernel, ::tessera::DType::f32, ::tessera::DType::f64,
                        ::tessera::DType::bf16, ::tessera::DType::f16);
TESSERA_REGISTER_KERNEL("randint", cpu, randint_kernel, ::tessera::DType::i64,
                        ::tessera::DType::i32, ::tessera::DType::u8, ::tessera::DType::f32,
                        ::tessera::DType::f64);

}  // namespace

}  // namespace tessera::cpu
