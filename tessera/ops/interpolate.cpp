// interpolate is separable: every mode resizes one spatial dim at a time as a
// sum over a few taps, index_select(x, dim, index_k) * weight_k, with the
// taps' source indices and weights computed once per dim as torch's upsample
// kernels do. Its gradient, SBP and degenerate shapes come with those ops.

#include "tessera/ops/interpolate.h"

#include <algorithm>
#include <cmath>

#include "tessera/ops/elementwise.h"
#include "tessera/ops/index.h"

namespace tessera {

namespace {

// Source indices and weights of one output dim: taps[k][o] reads input
// index[k][o] with weight weight[k][o].
struct Taps {
  std::vector<std::vector<int64_t>> index;
  std::vector<std::vector<double>> weight;
};

Taps make_taps(int64_t taps, int64_t out) {
  Taps t;
  t.index.assign(static_cast<size_t>(taps), std::vector<int64_t>(static_cast<size_t>(out), 0));
  t.weight.assign(static_cast<size_t>(taps), std::vector<double>(static_cast<size_t>(out), 0.0));
  return t;
}

// Input coordinates per output step (torch's compute_scales_value /
// area_pixel_compute_scale).
double scale_of(std::optional<double> scale, int64_t in, int64_t out) {
  return scale.has_value() && *scale > 0.0 ? 1.0 / *scale
                                           : static_cast<double>(in) / static_cast<double>(out);
}

double area_pixel_scale(bool align_corners, std::optional<double> scale, int64_t in, int64_t out) {
  if (align_corners) {
    return out > 1 ? static_cast<double>(in - 1) / static_cast<double>(out - 1) : 0.0;
  }
  return scale_of(scale, in, out);
}

double source_index(double scale, int64_t dst, bool align_corners, bool cubic) {
  if (align_corners) return scale * static_cast<double>(dst);
  const double src = scale * (static_cast<double>(dst) + 0.5) - 0.5;
  return !cubic && src < 0.0 ? 0.0 : src;
}

double cubic1(double x, double a) {
  return ((a + 2.0) * x - (a + 3.0)) * x * x + 1.0;
}
double cubic2(double x, double a) {
  return ((a * x - 5.0 * a) * x + 8.0 * a) * x - 4.0 * a;
}

Taps dim_taps(const std::string& mode, int64_t in, int64_t out, std::optional<double> scale,
              bool align_corners) {
  if (mode == "nearest" || mode == "nearest-exact") {
    Taps t = make_taps(1, out);
    const double s = scale_of(scale, in, out);
    const double shift = mode == "nearest" ? 0.0 : 0.5;
    for (int64_t o = 0; o < out; ++o) {
      const auto src = static_cast<int64_t>(std::floor((static_cast<double>(o) + shift) * s));
      t.index[0][static_cast<size_t>(o)] = std::min(src, in - 1);
      t.weight[0][static_cast<size_t>(o)] = 1.0;
    }
    return t;
  }
  if (mode == "area") {
    int64_t width = 1;
    for (int64_t o = 0; o < out; ++o) {
      const int64_t start = (o * in) / out, end = ((o + 1) * in + out - 1) / out;
      width = std::max(width, end - start);
    }
    Taps t = make_taps(width, out);
    for (int64_t o = 0; o < out; ++o) {
      const int64_t start = (o * in) / out, end = ((o + 1) * in + out - 1) / out;
      for (int64_t k = 0; k < width; ++k) {
        t.index[static_cast<size_t>(k)][static_cast<size_t>(o)] = std::min(start + k, end - 1);
        t.weight[static_cast<size_t>(k)][static_cast<size_t>(o)] =
            start + k < end ? 1.0 / static_cast<double>(end - start) : 0.0;
      }
    }
    return t;
  }
  const double s = area_pixel_scale(align_corners, scale, in, out);
  if (mode == "bicubic") {
    Taps t = make_taps(4, out);
    constexpr double kA = -0.75;
    for (int64_t o = 0; o < out; ++o) {
      const double src = source_index(s, o, align_corners, true);
      const double base = std::floor(src);
      const double f = src - base;
      const double coeff[4] = {cubic2(f + 1.0, kA), cubic1(f, kA), cubic1(1.0 - f, kA),
                               cubic2(2.0 - f, kA)};
      for (int64_t k = 0; k < 4; ++k) {
        const auto i = static_cast<int64_t>(base) - 1 + k;
        t.index[static_cast<size_t>(k)][static_cast<size_t>(o)] = std::clamp<int64_t>(i, 0, in - 1);
        t.weight[static_cast<size_t>(k)][static_cast<size_t>(o)] = coeff[k];
      }
    }
    return t;
  }
  Taps t = make_taps(2, out);
  for (int64_t o = 0; o < out; ++o) {
    const double src = source_index(s, o, align_corners, false);
    const auto i0 = static_cast<int64_t>(src);
    const double lambda = src - static_cast<double>(i0);
    t.index[0][static_cast<size_t>(o)] = i0;
    t.index[1][static_cast<size_t>(o)] = i0 + (i0 < in - 1 ? 1 : 0);
    t.weight[0][static_cast<size_t>(o)] = 1.0 - lambda;
    t.weight[1][static_cast<size_t>(o)] = lambda;
  }
  return t;
}

// Resizes dim `dim` of x to `out` by the taps.
Tensor resize_dim(const Tensor& x, int64_t dim, const Taps& taps) {
  const auto out = static_cast<int64_t>(taps.index[0].size());
  Shape weight_shape(static_cast<size_t>(x.dim()), 1);
  weight_shape[static_cast<size_t>(dim)] = out;
  Tensor result;
  for (size_t k = 0; k < taps.index.size(); ++k) {
    Tensor picked = index_select(x, dim, Tensor::from_vector(taps.index[k], {out}));
    const bool unit = std::all_of(taps.weight[k].begin(), taps.weight[k].end(),
                                  [](double w) { return w == 1.0; });
    if (!unit) {
      picked = mul(picked, cast(Tensor::from_vector(taps.weight[k], weight_shape), x.dtype()));
    }
    result = result.defined() ? add(result, picked) : picked;
  }
  return result;
}

}  // namespace

Tensor interpolate(const Tensor& x, const std::vector<int64_t>& size,
                   const std::vector<double>& scale_factor, const std::string& mode,
                   std::optional<bool> align_corners, std::optional<bool> recompute_scale_factor) {
  TESSERA_CHECK(x.defined(), "[interpolate] got an undefined tensor");
  TESSERA_CHECK(x.dim() >= 3 && x.dim() <= 5, "[interpolate] input must be 3-D, 4-D or 5-D ",
                "([N, C, spatial...]), got shape ", shape_str(x.shape()));
  const int64_t spatial = x.dim() - 2;
  const bool interpolating =
      mode == "linear" || mode == "bilinear" || mode == "bicubic" || mode == "trilinear";
  TESSERA_CHECK(interpolating || mode == "nearest" || mode == "nearest-exact" || mode == "area",
                "[interpolate] mode '", mode, "' is not valid; use nearest, nearest-exact, ",
                "linear, bilinear, bicubic, trilinear or area");
  const int64_t mode_dims = mode == "linear" ? 1 : mode == "trilinear" ? 3 : 2;
  TESSERA_CHECK(!interpolating || mode_dims == spatial, "[interpolate] mode '", mode, "' needs a ",
                mode_dims + 2, "-D input, got shape ", shape_str(x.shape()));
  TESSERA_CHECK(interpolating || !align_corners.has_value(), "[interpolate] align_corners can ",
                "only be set with the interpolating modes linear, bilinear, bicubic and ",
                "trilinear, not '", mode, "'");
  if ((mode == "nearest" || mode == "nearest-exact") && x.dtype() == DType::u8) {
    // Nearest only copies values: PyTorch takes u8 images here.
    return interpolate(x.to(DType::f32), size, scale_factor, mode, align_corners,
                       recompute_scale_factor)
        .to(DType::u8);
  }
  TESSERA_CHECK(is_floating(x.dtype()), "[interpolate] input must be floating (or u8 with ",
                "nearest), got ", dtype_name(x.dtype()));
  TESSERA_CHECK(size.empty() != scale_factor.empty(), "[interpolate] give exactly one of size ",
                "and scale_factor");
  const size_t given = size.empty() ? scale_factor.size() : size.size();
  TESSERA_CHECK(given == 1 || given == static_cast<size_t>(spatial), "[interpolate] ",
                size.empty() ? "scale_factor" : "size", " has ", given,
                " entries but the input has ", spatial, " spatial dims; give 1 or ", spatial);
  std::vector<int64_t> out_size(static_cast<size_t>(spatial));
  std::vector<std::optional<double>> scales(static_cast<size_t>(spatial));
  for (int64_t d = 0; d < spatial; ++d) {
    const size_t i = given == 1 ? 0 : static_cast<size_t>(d);
    const int64_t in = x.shape()[static_cast<size_t>(d + 2)];
    if (size.empty()) {
      out_size[static_cast<size_t>(d)] =
          static_cast<int64_t>(std::floor(static_cast<double>(in) * scale_factor[i]));
      if (!recompute_scale_factor.value_or(false)) scales[static_cast<size_t>(d)] = scale_factor[i];
    } else {
      out_size[static_cast<size_t>(d)] = size[i];
    }
    TESSERA_CHECK(in > 0 && out_size[static_cast<size_t>(d)] > 0, "[interpolate] input and ",
                  "output sizes must be greater than 0, got input ", shape_str(x.shape()),
                  " and output spatial size ", out_size[static_cast<size_t>(d)], " in dim ", d + 2);
  }
  Tensor result = x;
  for (int64_t d = 0; d < spatial; ++d) {
    const int64_t in = x.shape()[static_cast<size_t>(d + 2)];
    const Taps taps = dim_taps(mode, in, out_size[static_cast<size_t>(d)],
                               scales[static_cast<size_t>(d)], align_corners.value_or(false));
    result = resize_dim(result, d + 2, taps);
  }
  return result;
}

}  // namespace tessera
