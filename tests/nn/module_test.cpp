#include "testing.h"

namespace tessera::testing {
namespace {

struct Net : nn::Module {
  Net() : Module("Net") {
    fc1 = register_module("fc1", std::make_shared<nn::Linear>(4, 3));
    norm = register_module("norm", std::make_shared<nn::BatchNorm1d>(3));
    fc2 = register_module("fc2", std::make_shared<nn::Linear>(3, 2, /*bias=*/false));
    scale = register_parameter("scale", ones({2}));
    register_buffer("scratch", zeros({5}), /*persistent=*/false);
  }
  Tensor forward(const Tensor& x) override { return (*fc2)(relu((*norm)((*fc1)(x)))) * scale; }
  std::shared_ptr<nn::Linear> fc1, fc2;
  std::shared_ptr<nn::BatchNorm1d> norm;
  Tensor scale;
};

std::vector<std::string> keys_of(const nn::Module::NamedTensors& named) {
  std::vector<std::string> keys;
  for (const auto& [name, tensor] : named) keys.push_back(name);
  return keys;
}

TEST(Module, NamesParametersBuffersAndChildrenInRegistrationOrder) {
  Net net;
  EXPECT_EQ(keys_of(net.named_parameters()),
            (std::vector<std::string>{"scale", "fc1.weight", "fc1.bias", "norm.weight",
                                      "norm.bias", "fc2.weight"}));
  EXPECT_EQ(keys_of(net.named_buffers()),
            (std::vector<std::string>{"scratch", "norm.running_mean", "norm.running_var",
                                      "norm.num_batches_tracked"}));
  EXPECT_EQ(net.num_parameters(), 4 * 3 + 3 + 3 + 3 + 3 * 2 + 2);
  // Non-persistent buffers stay out of the state dict.
  EXPECT_EQ(net.state_dict().keys(),
            (std::vector<std::string>{"scale", "fc1.weight", "fc1.bias", "norm.weight",
                                      "norm.bias", "norm.running_mean", "norm.running_var",
                                      "norm.num_batches_tracked", "fc2.weight"}));
  EXPECT_EQ(net.named_modules().size(), 4u);
  EXPECT_HAS(error_of([&] { net.register_parameter("fc1", zeros({1})); }), "fc1");
}

TEST(Module, LoadStateDictCopiesInPlaceAndChecksStrictly) {
  manual_seed(1);
  Net source;
  manual_seed(2);
  Net target;
  Tensor weight_handle = target.fc1->weight;
  target.load_state_dict(source.state_dict());
  EXPECT_TRUE(all_close(weight_handle, source.fc1->weight, 0, 0));  // same handle, new values
  Tensor x = randn({5, 4});
  EXPECT_TRUE(all_close(target.forward(x), source.forward(x), 1e-6, 1e-6));

  StateDict partial;
  for (const auto& [key, value] : source.state_dict())
    if (key != "fc2.weight") partial.insert(key, value);
  std::string error = error_of([&] { target.load_state_dict(partial); });
  EXPECT_HAS(error, "missing");
  EXPECT_HAS(error, "fc2.weight");
  EXPECT_NO_THROW(target.load_state_dict(partial, /*strict=*/false));

  StateDict extra = source.state_dict();
  extra.insert("fc3.weight", zeros({1}));
  EXPECT_HAS(error_of([&] { target.load_state_dict(extra); }), "fc3.weight");

  StateDict wrong_shape = source.state_dict();
  wrong_shape.set("fc1.weight", zeros({3, 5}));
  error = error_of([&] { target.load_state_dict(wrong_shape); });
  EXPECT_HAS(error, "fc1.weight");
  EXPECT_HAS(error, "[3, 5]");

  StateDict wrong_dtype = source.state_dict();
  wrong_dtype.set("scale", zeros({2}, DType::f64));
  EXPECT_HAS(error_of([&] { target.load_state_dict(wrong_dtype); }), "scale");
}

TEST(Module, TrainEvalReachesEveryChildAndChangesBehaviour) {
  Net net;
  net.eval();
  for (auto& [name, module] : net.named_modules()) EXPECT_FALSE(module->is_training()) << name;
  net.train();
  EXPECT_TRUE(net.norm->is_training());
}

TEST(Module, ApplyToAndZeroGrad) {
  Net net;
  int visited = 0;
  net.apply([&](nn::Module&) { ++visited; });
  EXPECT_EQ(visited, 4);
  Tensor handle = net.fc1->weight;
  net.to(DType::f64);
  EXPECT_EQ(handle.dtype(), DType::f64);
  EXPECT_EQ(net.norm->num_batches_tracked.dtype(), DType::i64);  // integers stay
  Tensor loss = sum(net.forward(randn({3, 4}, DType::f64)));
  loss.backward();
  EXPECT_TRUE(net.fc1->weight.grad().defined());
  net.zero_grad();
  EXPECT_FALSE(net.fc1->weight.grad().defined());
}

TEST(Module, PrintsLikePyTorch) {
  Net net;
  const std::string text = net.repr();
  EXPECT_HAS(text, "Net(");
  EXPECT_HAS(text, "(fc1): Linear(in_features=4, out_features=3, bias=true)");
  EXPECT_HAS(text, "(fc2): Linear(in_features=3, out_features=2, bias=false)");
  EXPECT_HAS(text, "(norm): BatchNorm1d(3, eps=1e-05");
}

TEST(Containers, SequentialModuleListModuleDict) {
  auto seq = std::make_shared<nn::Sequential>(std::initializer_list<std::shared_ptr<nn::Module>>{
      std::make_shared<nn::Linear>(3, 4), std::make_shared<nn::Tanh>(),
      std::make_shared<nn::Linear>(4, 2)});
  EXPECT_EQ(seq->state_dict().keys(),
            (std::vector<std::string>{"0.weight", "0.bias", "2.weight", "2.bias"}));
  Tensor x = randn({2, 3});
  auto first = std::static_pointer_cast<nn::Linear>((*seq)[0]);
  auto last = std::static_pointer_cast<nn::Linear>((*seq)[2]);
  Tensor expected = matmul(tanh(matmul(x, first->weight.t()) + first->bias), last->weight.t()) +
                    last->bias;
  EXPECT_TRUE(all_close(seq->forward(x), expected, 1e-6, 1e-6));
  EXPECT_HAS(error_of([&] { (*seq)[3]; }), "3");

  nn::ModuleList list;
  list.push_back(std::make_shared<nn::Linear>(2, 2));
  list.push_back(std::make_shared<nn::ReLU>());
  EXPECT_EQ(list.size(), 2u);
  EXPECT_EQ(list.state_dict().keys(), (std::vector<std::string>{"0.weight", "0.bias"}));

  nn::ModuleDict dict;
  dict.insert("encoder", std::make_shared<nn::Linear>(2, 3));
  EXPECT_EQ(dict.state_dict().keys(),
            (std::vector<std::string>{"encoder.weight", "encoder.bias"}));
}

}  // namespace
}  // namespace tessera::testing
