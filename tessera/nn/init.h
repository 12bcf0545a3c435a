#pragma once

// Weight initialisers, as in torch.nn.init. Each fills `tensor` in place
// (outside autograd) from the given generator, or the default one, so a
// seeded run initialises identically every time.

#include <string>

#include "tessera/core/rng.h"
#include "tessera/core/tensor.h"

namespace tessera::nn {

// The recommended gain for a nonlinearity: "linear", "conv2d", "sigmoid"
// (1), "tanh" (5/3), "relu" (sqrt 2), "leaky_relu" (sqrt(2 / (1 + slope^2))),
// "selu" (3/4).
double calculate_gain(const std::string& nonlinearity, double param = 0.01);
// (fan_in, fan_out) of a weight of at least 2 dims: [out, in, kernel...].
std::pair<int64_t, int64_t> fan_in_and_fan_out(const Tensor& tensor);

// U(low, high).
Tensor& uniform_(Tensor& tensor, double low = 0.0, double high = 1.0,
                 Generator* generator = nullptr);
// N(mean, std^2).
Tensor& normal_(Tensor& tensor, double mean = 0.0, double std = 1.0,
                Generator* generator = nullptr);
// N(mean, std^2) restricted to [low, high] (inverse-CDF sampling, as PyTorch).
Tensor& trunc_normal_(Tensor& tensor, double mean = 0.0, double std = 1.0, double low = -2.0,
                      double high = 2.0, Generator* generator = nullptr);
Tensor& constant_(Tensor& tensor, double value);
Tensor& zeros_(Tensor& tensor);
Tensor& ones_(Tensor& tensor);

// Glorot: U(-a, a) with a = gain * sqrt(6 / (fan_in + fan_out)).
Tensor& xavier_uniform_(Tensor& tensor, double gain = 1.0, Generator* generator = nullptr);
// Glorot: N(0, std^2) with std = gain * sqrt(2 / (fan_in + fan_out)).
Tensor& xavier_normal_(Tensor& tensor, double gain = 1.0, Generator* generator = nullptr);
// He: U(-b, b) with b = gain * sqrt(3 / fan), fan = fan_in or fan_out by
// `mode`, gain from `nonlinearity` with slope `a`.
Tensor& kaiming_uniform_(Tensor& tensor, double a = 0.0, const std::string& mode = "fan_in",
                         const std::string& nonlinearity = "leaky_relu",
                         Generator* generator = nullptr);
// He: N(0, std^2) with std = gain / sqrt(fan).
Tensor& kaiming_normal_(Tensor& tensor, double a = 0.0, const std::string& mode = "fan_in",
                        const std::string& nonlinearity = "leaky_relu",
                        Generator* generator = nullptr);

}  // namespace tessera::nn
