#include "tessera/nn/upsample.h"

#include "tessera/nn/repr.h"
#include "tessera/ops/interpolate.h"

namespace tessera::nn {

namespace {

// One value as it is, several as a Python tuple: "4" or "(4, 5)".
template <typename T, typename Format>
std::string py_sequence(const std::vector<T>& values, Format format) {
  if (values.size() == 1) return format(values[0]);
  std::string text = "(";
  for (size_t i = 0; i < values.size(); ++i) text += (i ? ", " : "") + format(values[i]);
  return text + ")";
}

}  // namespace

Upsample::Upsample(UpsampleOptions options) : Module("Upsample"), options_(std::move(options)) {
  TESSERA_CHECK(options_.size.empty() != options_.scale_factor.empty(),
                "[Upsample] give exactly one of size and scale_factor, got ",
                options_.size.empty() ? "neither" : "both");
}

Tensor Upsample::forward(const Tensor& x) {
  return interpolate(x, options_.size, options_.scale_factor, options_.mode,
                     options_.align_corners, options_.recompute_scale_factor);
}

std::string Upsample::extra_repr() const {
  const std::string shape =
      options_.size.empty()
          ? "scale_factor=" + py_sequence(options_.scale_factor, py_float)
          : "size=" + py_sequence(options_.size, [](int64_t v) { return std::to_string(v); });
  return shape + ", mode=" + options_.mode;
}

}  // namespace tessera::nn
