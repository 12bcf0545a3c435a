#pragma once

// Elementwise activations as modules (torch.nn.ReLU, GELU, SiLU, Tanh,
// Sigmoid, LeakyReLU, ELU, ..., PReLU), for use in Sequential. Only PReLU
// holds a parameter; they share one file pair. The functions they call are
// in ops/elementwise.h and ops/activation.h.

#include <string>

#include "tessera/nn/module.h"

namespace tessera::nn {

class ReLU : public Module {
 public:
  ReLU() : Module("ReLU") {}
  Tensor forward(const Tensor& x) override;
};

// approximate: "none" (erf) or "tanh".
class GELU : public Module {
 public:
  explicit GELU(std::string approximate = "none");
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;

 private:
  std::string approximate_;
};

class SiLU : public Module {
 public:
  SiLU() : Module("SiLU") {}
  Tensor forward(const Tensor& x) override;
};

class Tanh : public Module {
 public:
  Tanh() : Module("Tanh") {}
  Tensor forward(const Tensor& x) override;
};

class Sigmoid : public Module {
 public:
  Sigmoid() : Module("Sigmoid") {}
  Tensor forward(const Tensor& x) override;
};

class LeakyReLU : public Module {
 public:
  explicit LeakyReLU(double negative_slope = 0.01)
      : Module("LeakyReLU"), negative_slope_(negative_slope) {}
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;

 private:
  double negative_slope_;
};

class ELU : public Module {
 public:
  explicit ELU(double alpha = 1.0) : Module("ELU"), alpha_(alpha) {}
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;

 private:
  double alpha_;
};

class CELU : public Module {
 public:
  explicit CELU(double alpha = 1.0) : Module("CELU"), alpha_(alpha) {}
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;

 private:
  double alpha_;
};

class SELU : public Module {
 public:
  SELU() : Module("SELU") {}
  Tensor forward(const Tensor& x) override;
};

class Hardtanh : public Module {
 public:
  explicit Hardtanh(double min_val = -1.0, double max_val = 1.0);
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;

 private:
  double min_val_;
  double max_val_;
};

class ReLU6 : public Module {
 public:
  ReLU6() : Module("ReLU6") {}
  Tensor forward(const Tensor& x) override;
};

class Hardswish : public Module {
 public:
  Hardswish() : Module("Hardswish") {}
  Tensor forward(const Tensor& x) override;
};

class Hardsigmoid : public Module {
 public:
  Hardsigmoid() : Module("Hardsigmoid") {}
  Tensor forward(const Tensor& x) override;
};

class Mish : public Module {
 public:
  Mish() : Module("Mish") {}
  Tensor forward(const Tensor& x) override;
};

class LogSigmoid : public Module {
 public:
  LogSigmoid() : Module("LogSigmoid") {}
  Tensor forward(const Tensor& x) override;
};

class Softsign : public Module {
 public:
  Softsign() : Module("Softsign") {}
  Tensor forward(const Tensor& x) override;
};

class Softplus : public Module {
 public:
  explicit Softplus(double beta = 1.0, double threshold = 20.0)
      : Module("Softplus"), beta_(beta), threshold_(threshold) {}
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;

 private:
  double beta_;
  double threshold_;
};

// Halves x along dim: a * sigmoid(b).
class GLU : public Module {
 public:
  explicit GLU(int64_t dim = -1) : Module("GLU"), dim_(dim) {}
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;

 private:
  int64_t dim_;
};

// x where x > threshold, else value.
class Threshold : public Module {
 public:
  Threshold(double threshold, double value)
      : Module("Threshold"), threshold_(threshold), value_(value) {}
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;

 private:
  double threshold_;
  double value_;
};

// Leaky ReLU with a learnt slope: one (num_parameters = 1) or one per
// channel (dim 1), initialised to `init`.
class PReLU : public Module {
 public:
  explicit PReLU(int64_t num_parameters = 1, double init = 0.25);
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;

  Tensor weight;

 private:
  int64_t num_parameters_;
};

}  // namespace tessera::nn
