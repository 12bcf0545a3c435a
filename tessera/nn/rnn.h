#pragma once

// Recurrent layers with PyTorch's parameter names, layouts, initialisation
// and outputs (torch.nn.RNN, LSTM, GRU), composed of public ops so autograd
// differentiates them through time:
//
//   nn::LSTM lstm(10, 20, {.num_layers = 2, .batch_first = true});
//   auto [output, state] = lstm(x);          // x [N, T, 10]
//   auto [h_n, c_n] = state;                 // [2, N, 20] each
//
// Input is [T, N, input_size] ([N, T, input_size] with batch_first) or
// unbatched [T, input_size]. output is [T, N, D * hidden_size] (D = 2 when
// bidirectional: forward and reverse features concatenated), the last
// layer's hidden state at every step; h_n (and c_n) are
// [num_layers * D, N, hidden_size], layer-major (l0, l0_reverse, l1, ...),
// unbatched inputs dropping the N dim throughout. Initial states default to
// zeros. Parameters per layer k (suffix "_reverse" for the reverse
// direction): weight_ih_lk [G * hidden_size, in], weight_hh_lk
// [G * hidden_size, hidden_size], bias_ih_lk and bias_hh_lk
// [G * hidden_size], with G gates stacked in PyTorch's order (LSTM: i, f,
// g, o; GRU: r, z, n; RNN: one), all starting as
// U(-1/sqrt(hidden_size), 1/sqrt(hidden_size)).

#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "tessera/nn/module.h"

namespace tessera::nn {

struct RNNOptions {
  int64_t num_layers = 1;
  // "tanh" or "relu"; RNN only.
  std::string nonlinearity = "tanh";
  bool bias = true;
  bool batch_first = false;
  // Dropout on every layer's output but the last, in training mode.
  double dropout = 0.0;
  bool bidirectional = false;
};

// What RNN, LSTM and GRU share: parameters, validation and the layer loop.
class RNNBase : public Module {
 public:
  int64_t input_size() const { return input_size_; }
  int64_t hidden_size() const { return hidden_size_; }
  const RNNOptions& options() const { return options_; }
  std::string extra_repr() const override;

 protected:
  enum class Cell { rnn_tanh, rnn_relu, lstm, gru };
  RNNBase(std::string type_name, Cell cell, int64_t input_size, int64_t hidden_size,
          RNNOptions options);
  // Runs every layer and direction; state holds h0 (and c0 for LSTM), each
  // undefined for zeros. Returns output and the final h (and c).
  std::vector<Tensor> run(const Tensor& input, const std::vector<Tensor>& state);

 private:
  struct Weights {
    Tensor weight_ih, weight_hh, bias_ih, bias_hh;
  };
  // One direction of one layer over the sequence x [T, N, in]; h (and c)
  // [N, H] are updated to the final state. Returns [T, N, H].
  Tensor run_direction(const Tensor& x, const Weights& weights, bool reverse, Tensor& h,
                       Tensor& c) const;

  Cell cell_;
  int64_t input_size_;
  int64_t hidden_size_;
  RNNOptions options_;
  std::vector<Weights> weights_;  // layer-major, forward then reverse
};

// RNN, LSTM and GRU take their state beside the input, as PyTorch's do, so
// their forward hides Module's one-tensor forward on purpose (a default
// state argument would make a visible one ambiguous).
#if defined(__clang__)
#pragma clang diagnostic push
#pragma clang diagnostic ignored "-Woverloaded-virtual"
#endif

// Elman RNN: h_t = nonlinearity(x_t W_ih^T + b_ih + h_{t-1} W_hh^T + b_hh).
class RNN : public RNNBase {
 public:
  RNN(int64_t input_size, int64_t hidden_size, const RNNOptions& options = {});
  // (output, h_n); h0 undefined for zeros.
  std::tuple<Tensor, Tensor> forward(const Tensor& input, const Tensor& h0 = {});
  std::tuple<Tensor, Tensor> operator()(const Tensor& input, const Tensor& h0 = {}) {
    return forward(input, h0);
  }
};

// Long short-term memory, PyTorch's equations (gates i, f, g, o).
class LSTM : public RNNBase {
 public:
  LSTM(int64_t input_size, int64_t hidden_size, const RNNOptions& options = {});
  // (output, (h_n, c_n)); no state for zeros.
  std::tuple<Tensor, std::tuple<Tensor, Tensor>> forward(
      const Tensor& input, const std::optional<std::tuple<Tensor, Tensor>>& state = std::nullopt);
  std::tuple<Tensor, std::tuple<Tensor, Tensor>> operator()(
      const Tensor& input, const std::optional<std::tuple<Tensor, Tensor>>& state = std::nullopt) {
    return forward(input, state);
  }
};

// Gated recurrent unit, PyTorch's equations (gates r, z, n; the reset gate
// multiplies h_{t-1} W_hn^T + b_hn).
class GRU : public RNNBase {
 public:
  GRU(int64_t input_size, int64_t hidden_size, const RNNOptions& options = {});
  // (output, h_n); h0 undefined for zeros.
  std::tuple<Tensor, Tensor> forward(const Tensor& input, const Tensor& h0 = {});
  std::tuple<Tensor, Tensor> operator()(const Tensor& input, const Tensor& h0 = {}) {
    return forward(input, h0);
  }
};

#if defined(__clang__)
#pragma clang diagnostic pop
#endif

}  // namespace tessera::nn
