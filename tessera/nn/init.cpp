#include "tessera/nn/init.h"

#include <cmath>
#include <vector>

#include "tessera/core/grad_mode.h"
#include "tessera/ops/creation.h"
#include "tessera/ops/elementwise.h"

namespace tessera::nn {
namespace {

void check_floating(const Tensor& tensor, const char* op) {
  TESSERA_CHECK(tensor.defined(), "[", op, "] got an undefined tensor");
  TESSERA_CHECK(is_floating(tensor.dtype()), "[", op,
                "] needs a floating-point tensor, got ", dtype_name(tensor.dtype()));
}

// Writes `values` (drawn in f32 or f64) into `tensor` outside autograd.
Tensor& assign(Tensor& tensor, const Tensor& values) {
  NoGradGuard no_grad;
  tensor.copy_(values);
  return tensor;
}

int64_t fan(const Tensor& tensor, const std::string& mode, const char* op) {
  auto [fan_in, fan_out] = fan_in_and_fan_out(tensor);
  TESSERA_CHECK(mode == "fan_in" || mode == "fan_out", "[", op,
                "] mode must be \"fan_in\" or \"fan_out\", got \"", mode, "\"");
  return mode == "fan_in" ? fan_in : fan_out;
}

// Inverse of erf on (-1, 1): a rational first guess refined by Newton steps.
double erfinv(double y) {
  const double w = -std::log((1.0 - y) * (1.0 + y));
  double x;
  if (w < 5.0) {
    double t = w - 2.5;
    x = 2.81022636e-08;
    for (double c : {3.43273939e-07, -3.5233877e-06, -4.39150654e-06, 0.00021858087,
                     -0.00125372503, -0.00417768164, 0.246640727, 1.50140941})
      x = x * t + c;
  } else {
    double t = std::sqrt(w) - 3.0;
    x = -0.000200214257;
    for (double c : {0.000100950558, 0.00134934322, -0.00367342844, 0.00573950773,
                     -0.0076224613, 0.00943887047, 1.00167406, 2.83297682})
      x = x * t + c;
  }
  x *= y;
  for (int i = 0; i < 2; ++i) {
    const double error = std::erf(x) - y;
    x -= error / (2.0 / std::sqrt(M_PI) * std::exp(-x * x));
  }
  return x;
}

}  // namespace

double calculate_gain(const std::string& nonlinearity, double param) {
  if (nonlinearity == "linear" || nonlinearity == "conv1d" || nonlinearity == "conv2d" ||
      nonlinearity == "conv3d" || nonlinearity == "sigmoid")
    return 1.0;
  if (nonlinearity == "tanh") return 5.0 / 3.0;
  if (nonlinearity == "relu") return std::sqrt(2.0);
  if (nonlinearity == "leaky_relu") return std::sqrt(2.0 / (1.0 + param * param));
  if (nonlinearity == "selu") return 3.0 / 4.0;
  TESSERA_FAIL("[calculate_gain] unknown nonlinearity \"", nonlinearity,
                "\"; valid: linear, conv1d, conv2d, conv3d, sigmoid, tanh, relu, leaky_relu, selu");
}

std::pair<int64_t, int64_t> fan_in_and_fan_out(const Tensor& tensor) {
  TESSERA_CHECK(tensor.dim() >= 2, "[fan_in_and_fan_out] needs a tensor of at least 2 dims, got ",
                shape_str(tensor.shape()));
  int64_t receptive_field = 1;
  for (int64_t d = 2; d < tensor.dim(); ++d) receptive_field *= tensor.size(d);
  return {tensor.size(1) * receptive_field, tensor.size(0) * receptive_field};
}

Tensor& uniform_(Tensor& tensor, double low, double high, Generator* generator) {
  check_floating(tensor, "uniform_");
  TESSERA_CHECK(low <= high, "[uniform_] low (", low, ") must not exceed high (", high, ")");
  Tensor unit = rand(tensor.shape(), DType::f64, generator);
  return assign(tensor, unit * (high - low) + low);
}

Tensor& normal_(Tensor& tensor, double mean, double std, Generator* generator) {
  check_floating(tensor, "normal_");
  TESSERA_CHECK(std >= 0.0, "[normal_] std must be non-negative, got ", std);
  return assign(tensor, randn(tensor.shape(), DType::f64, generator) * std + mean);
}

Tensor& trunc_normal_(Tensor& tensor, double mean, double std, double low, double high,
                      Generator* generator) {
  check_floating(tensor, "trunc_normal_");
  TESSERA_CHECK(std > 0.0 && low < high, "[trunc_normal_] needs std > 0 and low < high, got std=",
                std, ", low=", low, ", high=", high);
  auto normal_cdf = [](double x) { return 0.5 * (1.0 + std::erf(x / std::sqrt(2.0))); };
  const double cdf_low = normal_cdf((low - mean) / std);
  const double cdf_high = normal_cdf((high - mean) / std);
  std::vector<double> values = rand(tensor.shape(), DType::f64, generator).to_vector<double>();
  for (double& v : values) {
    const double u = 2.0 * (cdf_low + v * (cdf_high - cdf_low)) - 1.0;
    const double clipped = std::min(std::max(u, -1.0 + 1e-15), 1.0 - 1e-15);
    v = std::min(std::max(mean + std * std::sqrt(2.0) * erfinv(clipped), low), high);
  }
  return assign(tensor, Tensor::from_vector(values, tensor.shape()));
}

Tensor& constant_(Tensor& tensor, double value) {
  NoGradGuard no_grad;
  tensor.fill_(value);
  return tensor;
}
Tensor& zeros_(Tensor& tensor) { return constant_(tensor, 0.0); }
Tensor& ones_(Tensor& tensor) { return constant_(tensor, 1.0); }

Tensor& xavier_uniform_(Tensor& tensor, double gain, Generator* generator) {
  auto [fan_in, fan_out] = fan_in_and_fan_out(tensor);
  const double bound = gain * std::sqrt(6.0 / static_cast<double>(fan_in + fan_out));
  return uniform_(tensor, -bound, bound, generator);
}

Tensor& xavier_normal_(Tensor& tensor, double gain, Generator* generator) {
  auto [fan_in, fan_out] = fan_in_and_fan_out(tensor);
  return normal_(tensor, 0.0, gain * std::sqrt(2.0 / static_cast<double>(fan_in + fan_out)),
                 generator);
}

Tensor& kaiming_uniform_(Tensor& tensor, double a, const std::string& mode,
                         const std::string& nonlinearity, Generator* generator) {
  const double std = calculate_gain(nonlinearity, a) /
                     std::sqrt(static_cast<double>(fan(tensor, mode, "kaiming_uniform_")));
  return uniform_(tensor, -std::sqrt(3.0) * std, std::sqrt(3.0) * std, generator);
}

Tensor& kaiming_normal_(Tensor& tensor, double a, const std::string& mode,
                        const std::string& nonlinearity, Generator* generator) {
  const double std = calculate_gain(nonlinearity, a) /
                     std::sqrt(static_cast<double>(fan(tensor, mode, "kaiming_normal_")));
  return normal_(tensor, 0.0, std, generator);
}

}  // namespace tessera::nn
