#include "tessera/nn/rnn.h"

#include <cmath>

#include "tessera/nn/init.h"
#include "tessera/ops/concat.h"
#include "tessera/ops/creation.h"
#include "tessera/ops/dropout.h"
#include "tessera/ops/elementwise.h"
#include "tessera/ops/matmul.h"

namespace tessera::nn {
namespace {

int64_t gate_count(bool lstm, bool gru) { return lstm ? 4 : gru ? 3 : 1; }

}  // namespace

RNNBase::RNNBase(std::string type_name, Cell cell, int64_t input_size, int64_t hidden_size,
                 RNNOptions options)
    : Module(std::move(type_name)),
      cell_(cell),
      input_size_(input_size),
      hidden_size_(hidden_size),
      options_(std::move(options)) {
  const std::string& name = this->type_name();
  TESSERA_CHECK(input_size > 0 && hidden_size > 0, "[", name,
                "] input_size and hidden_size must be positive, got input_size=", input_size,
                ", hidden_size=", hidden_size);
  TESSERA_CHECK(options_.num_layers > 0, "[", name, "] num_layers must be positive, got ",
                options_.num_layers);
  TESSERA_CHECK(options_.dropout >= 0.0 && options_.dropout <= 1.0, "[", name,
                "] dropout must be in [0, 1], got ", options_.dropout);
  const int64_t gates = gate_count(cell == Cell::lstm, cell == Cell::gru);
  const int64_t directions = options_.bidirectional ? 2 : 1;
  const double bound = 1.0 / std::sqrt(static_cast<double>(hidden_size));
  auto make = [&](const std::string& param_name, const Shape& shape) {
    Tensor value = register_parameter(param_name, Tensor::empty(shape));
    uniform_(value, -bound, bound);
    return value;
  };
  for (int64_t layer = 0; layer < options_.num_layers; ++layer) {
    const int64_t in = layer == 0 ? input_size : hidden_size * directions;
    for (int64_t direction = 0; direction < directions; ++direction) {
      const std::string suffix = str_cat("_l", layer, direction == 1 ? "_reverse" : "");
      Weights weights;
      weights.weight_ih = make("weight_ih" + suffix, {gates * hidden_size, in});
      weights.weight_hh = make("weight_hh" + suffix, {gates * hidden_size, hidden_size});
      if (options_.bias) {
        weights.bias_ih = make("bias_ih" + suffix, {gates * hidden_size});
        weights.bias_hh = make("bias_hh" + suffix, {gates * hidden_size});
      }
      weights_.push_back(weights);
    }
  }
}

std::string RNNBase::extra_repr() const {
  std::string text = str_cat(input_size_, ", ", hidden_size_);
  if (options_.num_layers != 1) text += str_cat(", num_layers=", options_.num_layers);
  if (cell_ == Cell::rnn_relu) text += ", nonlinearity='relu'";
  if (!options_.bias) text += ", bias=false";
  if (options_.batch_first) text += ", batch_first=true";
  if (options_.dropout != 0.0) text += str_cat(", dropout=", options_.dropout);
  if (options_.bidirectional) text += ", bidirectional=true";
  return text;
}

Tensor RNNBase::run_direction(const Tensor& x, const Weights& weights, bool reverse, Tensor& h,
                              Tensor& c) const {
  const int64_t steps = x.size(0);
  const int64_t hidden = hidden_size_;
  // The input projection of every step at once: [T, N, G * H].
  Tensor projected = matmul(x, weights.weight_ih.t());
  if (weights.bias_ih.defined()) projected = projected + weights.bias_ih;
  const Tensor weight_hh_t = weights.weight_hh.t();
  std::vector<Tensor> outputs(static_cast<size_t>(steps));
  for (int64_t i = 0; i < steps; ++i) {
    const int64_t t = reverse ? steps - 1 - i : i;
    const Tensor x_gates = projected.select(0, t);
    Tensor h_gates = matmul(h, weight_hh_t);
    if (weights.bias_hh.defined()) h_gates = h_gates + weights.bias_hh;
    switch (cell_) {
      case Cell::rnn_tanh:
        h = tanh(x_gates + h_gates);
        break;
      case Cell::rnn_relu:
        h = relu(x_gates + h_gates);
        break;
      case Cell::lstm: {
        const Tensor gates = x_gates + h_gates;
        const Tensor input_gate = sigmoid(gates.narrow(-1, 0, hidden));
        const Tensor forget_gate = sigmoid(gates.narrow(-1, hidden, hidden));
        const Tensor cell_gate = tanh(gates.narrow(-1, 2 * hidden, hidden));
        const Tensor output_gate = sigmoid(gates.narrow(-1, 3 * hidden, hidden));
        c = forget_gate * c + input_gate * cell_gate;
        h = output_gate * tanh(c);
        break;
      }
      case Cell::gru: {
        const Tensor reset = sigmoid(x_gates.narrow(-1, 0, hidden) + h_gates.narrow(-1, 0, hidden));
        const Tensor update =
            sigmoid(x_gates.narrow(-1, hidden, hidden) + h_gates.narrow(-1, hidden, hidden));
        const Tensor candidate = tanh(x_gates.narrow(-1, 2 * hidden, hidden) +
                                      reset * h_gates.narrow(-1, 2 * hidden, hidden));
        h = candidate + update * (h - candidate);
        break;
      }
    }
    outputs[static_cast<size_t>(t)] = h;
  }
  return stack(outputs, 0);
}

std::vector<Tensor> RNNBase::run(const Tensor& input, const std::vector<Tensor>& state) {
  const std::string& name = type_name();
  const bool lstm = cell_ == Cell::lstm;
  TESSERA_CHECK(input.defined() && (input.dim() == 2 || input.dim() == 3), "[", name,
                "] expected input of 2 (unbatched) or 3 dims, got shape ",
                input.defined() ? shape_str(input.shape()) : "undefined");
  TESSERA_CHECK(is_floating(input.dtype()), "[", name, "] input must be floating point, got ",
                dtype_name(input.dtype()));
  TESSERA_CHECK(input.size(-1) == input_size_, "[", name, "] expected input with last dim ",
                input_size_, " (input_size), got shape ", shape_str(input.shape()));
  const bool batched = input.dim() == 3;
  // Time-major [T, N, in] from here on.
  Tensor x = batched ? (options_.batch_first ? input.transpose(0, 1) : input) : input.unsqueeze(1);
  const int64_t batch = x.size(1);
  const int64_t directions = options_.bidirectional ? 2 : 1;
  const int64_t layers = options_.num_layers;
  const Shape state_shape = batched ? Shape{layers * directions, batch, hidden_size_}
                                    : Shape{layers * directions, hidden_size_};
  std::vector<Tensor> initial;
  const char* state_names[] = {"h0", "c0"};
  for (size_t k = 0; k < state.size(); ++k) {
    Tensor s = state[k];
    if (!s.defined()) {
      s = zeros({layers * directions, batch, hidden_size_}, input.dtype());
      if (input.device() != s.device()) s = s.to(input.device());
    } else {
      TESSERA_CHECK(s.shape() == state_shape, "[", name, "] expected ", state_names[k],
                    " of shape ", shape_str(state_shape), " for input of shape ",
                    shape_str(input.shape()), ", got ", shape_str(s.shape()));
      TESSERA_CHECK(s.dtype() == input.dtype(), "[", name, "] ", state_names[k], " is ",
                    dtype_name(s.dtype()), " but the input is ", dtype_name(input.dtype()));
      if (!batched) s = s.unsqueeze(1);
    }
    initial.push_back(s);
  }

  std::vector<Tensor> final_h, final_c;
  for (int64_t layer = 0; layer < layers; ++layer) {
    std::vector<Tensor> direction_outputs;
    for (int64_t direction = 0; direction < directions; ++direction) {
      const int64_t index = layer * directions + direction;
      Tensor h = initial[0].select(0, index);
      Tensor c = lstm ? initial[1].select(0, index) : Tensor();
      direction_outputs.push_back(
          run_direction(x, weights_[static_cast<size_t>(index)], direction == 1, h, c));
      final_h.push_back(h);
      if (lstm) final_c.push_back(c);
    }
    x = directions == 1 ? direction_outputs[0] : cat(direction_outputs, -1);
    if (layer + 1 < layers && options_.dropout > 0.0 && is_training()) {
      x = dropout(x, options_.dropout, true);
    }
  }
  std::vector<Tensor> out;
  out.push_back(batched ? (options_.batch_first ? x.transpose(0, 1) : x) : x.squeeze(1));
  for (std::vector<Tensor>* finals : {&final_h, &final_c}) {
    if (finals->empty()) continue;
    Tensor stacked = stack(*finals, 0);
    out.push_back(batched ? stacked : stacked.squeeze(1));
  }
  return out;
}

RNN::RNN(int64_t input_size, int64_t hidden_size, const RNNOptions& options)
    : RNNBase("RNN",
              options.nonlinearity == "relu" ? Cell::rnn_relu : Cell::rnn_tanh,
              input_size, hidden_size, options) {
  TESSERA_CHECK(options.nonlinearity == "tanh" || options.nonlinearity == "relu",
                "[RNN] nonlinearity must be \"tanh\" or \"relu\", got \"", options.nonlinearity,
                "\"");
}

std::tuple<Tensor, Tensor> RNN::forward(const Tensor& input, const Tensor& h0) {
  std::vector<Tensor> out = run(input, {h0});
  return {out[0], out[1]};
}

LSTM::LSTM(int64_t input_size, int64_t hidden_size, const RNNOptions& options)
    : RNNBase("LSTM", Cell::lstm, input_size, hidden_size, options) {}

std::tuple<Tensor, std::tuple<Tensor, Tensor>> LSTM::forward(
    const Tensor& input, const std::optional<std::tuple<Tensor, Tensor>>& state) {
  std::vector<Tensor> out =
      run(input, state ? std::vector<Tensor>{std::get<0>(*state), std::get<1>(*state)}
                       : std::vector<Tensor>{Tensor(), Tensor()});
  return {out[0], {out[1], out[2]}};
}

GRU::GRU(int64_t input_size, int64_t hidden_size, const RNNOptions& options)
    : RNNBase("GRU", Cell::gru, input_size, hidden_size, options) {}

std::tuple<Tensor, Tensor> GRU::forward(const Tensor& input, const Tensor& h0) {
  std::vector<Tensor> out = run(input, {h0});
  return {out[0], out[1]};
}

}  // namespace tessera::nn
