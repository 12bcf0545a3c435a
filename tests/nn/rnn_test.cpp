#include <cmath>

#include "testing.h"
#include "torch_check.h"

namespace tessera::testing {
namespace {

// Sets every parameter of `module` (f64) to 0.4 * sin(0.37 * i + k), i the
// element and k the parameter's position, and returns the same assignment
// as a Python dict expression, so PyTorch runs with equal weights.
std::string set_weights(nn::Module& module) {
  std::string dict = "{";
  StateDict state;
  double k = 0;
  for (const auto& [name, param] : module.named_parameters()) {
    std::vector<double> values(static_cast<size_t>(param.numel()));
    for (size_t i = 0; i < values.size(); ++i) values[i] = 0.4 * std::sin(0.37 * i + k);
    state.insert(name, Tensor::from_vector(values, param.shape()));
    dict += str_cat("'", name, "': 0.4 * torch.sin(0.37 * torch.arange(", param.numel(),
                    ", dtype=torch.float64) + ", k, ").reshape(", shape_str(param.shape()), "), ");
    ++k;
  }
  module.load_state_dict(state);
  return dict + "}";
}

// PyTorch's module `constructor` run with the weights of set_weights on the
// inputs named in `arguments` (a tuple). The weights are copied in, since
// PyTorch 1.13's RNNs keep their own list of weights that functional_call
// does not replace.
std::string torch_call(const std::string& constructor, const std::string& weights,
                       const std::string& arguments) {
  return "(lambda m, w: ([p.data.copy_(w[n]) for n, p in m.named_parameters()], m(*" +
         arguments + "))[1])(" + constructor + ".double(), " + weights + ")";
}

// Central finite differences of sum(loss()) with respect to a few elements of
// every parameter, against autograd's gradients.
::testing::AssertionResult parameter_gradients_match(nn::Module& module,
                                                     const std::function<Tensor()>& loss) {
  module.zero_grad();
  loss().backward();
  for (const auto& [name, param] : module.named_parameters()) {
    const std::vector<double> grad = param.grad().to_vector<double>();
    double* data = param.data<double>();
    for (int64_t i = 0; i < param.numel(); i += 1 + param.numel() / 5) {
      const double saved = data[i];
      data[i] = saved + 1e-6;
      const double up = loss().item<double>();
      data[i] = saved - 1e-6;
      const double down = loss().item<double>();
      data[i] = saved;
      const double numeric = (up - down) / 2e-6;
      if (std::abs(numeric - grad[static_cast<size_t>(i)]) > 1e-5 + 1e-4 * std::abs(numeric)) {
        return ::testing::AssertionFailure() << name << "[" << i << "]: autograd "
                                             << grad[static_cast<size_t>(i)] << ", numeric "
                                             << numeric;
      }
    }
  }
  return ::testing::AssertionSuccess();
}

TEST(RNN, ParametersHavePyTorchsNamesAndShapes) {
  nn::LSTM lstm(3, 5, {.num_layers = 2, .bidirectional = true});
  std::vector<std::string> names;
  for (const auto& [name, param] : lstm.named_parameters()) names.push_back(name);
  EXPECT_EQ(names.size(), 16u);
  EXPECT_EQ(names[0], "weight_ih_l0");
  EXPECT_EQ(names[4], "weight_ih_l0_reverse");
  EXPECT_EQ(names[11], "bias_hh_l1");
  EXPECT_EQ(lstm.named_parameters()[0].second.shape(), (Shape{20, 3}));
  EXPECT_EQ(lstm.named_parameters()[8].second.shape(), (Shape{20, 10}));
  const double bound = 1.0 / std::sqrt(5.0);
  for (const Tensor& p : lstm.parameters())
    for (double v : p.to_vector<double>()) EXPECT_LE(std::abs(v), bound);
  nn::GRU gru(3, 4, {.bias = false});
  EXPECT_EQ(gru.parameters().size(), 2u);
  EXPECT_EQ(gru.parameters()[1].shape(), (Shape{12, 4}));
  EXPECT_EQ(lstm.repr(), "LSTM(3, 5, num_layers=2, bidirectional=true)");
}

TEST(RNN, ElmanMatchesAHandLoop) {
  nn::RNN rnn(1, 1, {.bias = false});
  rnn.to(DType::f64);
  StateDict state;
  state.insert("weight_ih_l0", make({0.5}, {1, 1}));
  state.insert("weight_hh_l0", make({-1.0}, {1, 1}));
  rnn.load_state_dict(state);
  auto [output, h_n] = rnn(make({1.0, 2.0}, {2, 1, 1}), make({0.25}, {1, 1, 1}));
  const double h1 = std::tanh(0.5 - 0.25), h2 = std::tanh(1.0 - h1);
  EXPECT_TRUE(all_close(output, {h1, h2}, 1e-12, 1e-12));
  EXPECT_TRUE(all_close(h_n, {h2}, 1e-12, 1e-12));
}

TEST(RNN, LstmMatchesPyTorch) {
  nn::LSTM lstm(3, 4, {.num_layers = 2, .bidirectional = true});
  lstm.to(DType::f64);
  const std::string weights = set_weights(lstm);
  const std::string module = "torch.nn.LSTM(3, 4, num_layers=2, bidirectional=True)";
  auto run = [&](const Inputs& x) {
    auto [output, state] = lstm(x[0], std::make_tuple(x[1], x[2]));
    auto [h_n, c_n] = state;
    return std::vector<Tensor>{output, h_n, c_n};
  };
  EXPECT_TRUE(matches_torch(torch_call(module, weights, "(a, (b, c))"),
                            {uniform({5, 2, 3}), uniform({4, 2, 4}, -1, 1, 2),
                             uniform({4, 2, 4}, -1, 1, 3)},
                            run));
  // Unbatched input and default (zero) states.
  EXPECT_TRUE(matches_torch(torch_call(module, weights, "(a,)"), {uniform({6, 3})},
                            [&](const Inputs& x) {
                              auto [output, state] = lstm(x[0]);
                              return std::vector<Tensor>{output, std::get<0>(state),
                                                         std::get<1>(state)};
                            }));
  Tensor x = uniform({3, 2, 3});
  EXPECT_TRUE(parameter_gradients_match(lstm, [&] {
    auto [output, state] = lstm(x);
    return sum(output * output) + sum(std::get<1>(state));
  }));
}

TEST(RNN, GruMatchesPyTorch) {
  nn::GRU gru(3, 4, {.num_layers = 2, .batch_first = true});
  gru.to(DType::f64);
  const std::string weights = set_weights(gru);
  const std::string module = "torch.nn.GRU(3, 4, num_layers=2, batch_first=True)";
  EXPECT_TRUE(matches_torch(torch_call(module, weights, "(a, b)"),
                            {uniform({2, 5, 3}), uniform({2, 2, 4}, -1, 1, 2)},
                            [&](const Inputs& x) {
                              auto [output, h_n] = gru(x[0], x[1]);
                              return std::vector<Tensor>{output, h_n};
                            }));
  Tensor x = uniform({2, 3, 3});
  EXPECT_TRUE(parameter_gradients_match(gru, [&] {
    auto [output, h_n] = gru(x);
    return sum(output * output) + sum(h_n);
  }));
}

TEST(RNN, ReluRnnMatchesPyTorch) {
  nn::RNN rnn(2, 3, {.nonlinearity = "relu", .bidirectional = true});
  rnn.to(DType::f64);
  const std::string weights = set_weights(rnn);
  EXPECT_TRUE(matches_torch(
      torch_call("torch.nn.RNN(2, 3, nonlinearity='relu', bidirectional=True)", weights, "(a,)"),
      {uniform({4, 3, 2})}, [&](const Inputs& x) {
        auto [output, h_n] = rnn(x[0]);
        return std::vector<Tensor>{output, h_n};
      }));
}

TEST(RNN, DropoutOnlyBetweenLayersInTraining) {
  manual_seed(0);
  nn::GRU gru(2, 3, {.num_layers = 2, .dropout = 0.5});
  Tensor x = uniform({4, 1, 2}, -1, 1, 1, DType::f32);
  gru.eval();
  auto [first, h1] = gru(x);
  auto [second, h2] = gru(x);
  EXPECT_TRUE(all_close(first, second, 0.0, 0.0));
  gru.train();
  auto [third, h3] = gru(x);
  EXPECT_FALSE(all_close(first, third, 1e-6, 1e-6));
}

TEST(RNN, RejectsBadArgumentsNamingTheLayer) {
  EXPECT_HAS(error_of([] { nn::LSTM(0, 4); }), "[LSTM] input_size and hidden_size");
  EXPECT_HAS(error_of([] { nn::GRU(2, 4, {.num_layers = 0}); }), "[GRU] num_layers");
  EXPECT_HAS(error_of([] { nn::RNN(2, 4, {.nonlinearity = "sigmoid"}); }), "[RNN] nonlinearity");
  EXPECT_HAS(error_of([] { nn::LSTM(2, 4, {.dropout = 1.5}); }), "[LSTM] dropout");
  nn::LSTM lstm(2, 4);
  EXPECT_HAS(error_of([&] { lstm(zeros({3, 1, 5})); }), "[LSTM] expected input with last dim 2");
  EXPECT_HAS(error_of([&] { lstm(zeros({3})); }), "[LSTM] expected input of 2");
  EXPECT_HAS(error_of([&] { lstm(zeros({3, 2, 2}), std::make_tuple(zeros({1, 3, 4}), zeros({1, 2, 4}))); }),
             "[LSTM] expected h0 of shape [1, 2, 4]");
}

}  // namespace
}  // namespace tessera::testing
