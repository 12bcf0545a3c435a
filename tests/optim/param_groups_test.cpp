#include "testing.h"

namespace tessera::testing {
namespace {

// Two linear layers: the first frozen as a pretrained backbone would be.
struct TwoLayers : nn::Module {
  TwoLayers() : Module("TwoLayers") {
    backbone = register_module("backbone", std::make_shared<nn::Linear>(2, 2));
    head = register_module("head", std::make_shared<nn::Linear>(2, 1));
  }
  Tensor forward(const Tensor& x) override { return (*head)((*backbone)(x)); }
  std::shared_ptr<nn::Linear> backbone, head;
};

TEST(RequiresGrad, FreezesAndUnfreezesEveryParameter) {
  TwoLayers model;
  model.backbone->requires_grad_(false);
  EXPECT_FALSE(model.backbone->weight.requires_grad());
  EXPECT_FALSE(model.backbone->bias.requires_grad());
  EXPECT_TRUE(model.head->weight.requires_grad());
  model.requires_grad_(false);
  EXPECT_FALSE(model.head->bias.requires_grad());
  model.requires_grad_();
  for (const Tensor& param : model.parameters()) EXPECT_TRUE(param.requires_grad());
}

TEST(RequiresGrad, OptimizersSkipFrozenParametersAsPyTorch) {
  manual_seed(0);
  TwoLayers model;
  model.backbone->requires_grad_(false);
  const Tensor backbone_before = model.backbone->weight.clone();
  const Tensor head_before = model.head->weight.clone();
  optim::SGD sgd(model.parameters(), {.lr = 0.1, .momentum = 0.9});
  optim::Adam adam(model.named_parameters(), {.lr = 0.1});
  Tensor x = randn({4, 2});
  for (int step = 0; step < 2; ++step) {
    sgd.zero_grad();
    sum(model(x)).backward();
    EXPECT_FALSE(model.backbone->weight.grad().defined());
    sgd.step();
  }
  EXPECT_TRUE(all_close(model.backbone->weight, backbone_before, 0.0, 0.0));
  EXPECT_FALSE(all_close(model.head->weight, head_before, 0.0, 0.0));
  // Frozen parameters keep no state.
  for (const auto& [key, value] : sgd.state_dict()) {
    EXPECT_EQ(key.rfind("state.0.", 0), std::string::npos) << key;
    EXPECT_EQ(key.rfind("state.1.", 0), std::string::npos) << key;
  }

  // Unfrozen later, they train (the optimizer holds them all along).
  model.backbone->requires_grad_(true);
  sgd.zero_grad();
  sum(model(x)).backward();
  sgd.step();
  EXPECT_FALSE(all_close(model.backbone->weight, backbone_before, 0.0, 0.0));
}

TEST(RequiresGrad, ErrorsNameParametersGivenByName) {
  TwoLayers model;
  optim::SGD sgd(model.named_parameters(), {.lr = 0.1});
  EXPECT_EQ(sgd.param_name(2), "'head.weight'");
  model.head->weight.set_grad(zeros({3}));
  EXPECT_HAS(error_of([&] { sgd.step(); }), "'head.weight'");

  optim::SGD unnamed(model.parameters(), {.lr = 0.1});
  EXPECT_EQ(unnamed.param_name(2), "2");

  Tensor leaf = zeros({2}).set_requires_grad();
  optim::NamedParameters twice{{"a", leaf}, {"b", leaf}};
  EXPECT_HAS(error_of([&] { optim::AdamW adamw(twice); }), "parameter 'b' appears more than once");
  optim::NamedParameters not_leaf{{"fc.weight", leaf * 2.0}};
  EXPECT_HAS(error_of([&] { optim::Adam adam(not_leaf); }), "parameter 'fc.weight'");

  // Optimizer state keys stay by index; mismatches name the parameter.
  StateDict state = sgd.state_dict();
  state.insert("state.3.momentum_buffer", zeros({5}));
  EXPECT_HAS(error_of([&] { sgd.load_state_dict(state); }), "'head.bias'");
}

TEST(AddParamGroup, EachGroupHasItsOptionsAndState) {
  Tensor a = ones({2}).set_requires_grad(), b = ones({2}).set_requires_grad();
  Tensor c = ones({1}).set_requires_grad();
  optim::Adam adam({a}, {.lr = 0.1});
  adam.add_param_group({b}, {.lr = 0.01, .weight_decay = 0.5});
  adam.add_param_group(optim::NamedParameters{{"c", c}}, {.lr = 0.0});
  ASSERT_EQ(adam.num_param_groups(), 3u);
  EXPECT_DOUBLE_EQ(adam.lr(1), 0.01);
  EXPECT_DOUBLE_EQ(adam.options(1).weight_decay, 0.5);
  EXPECT_EQ(adam.param_name(2), "'c'");
  sum(a + b + c).backward();
  adam.step();
  // Adam's first step moves by lr in the gradient's sign; lr 0 leaves c.
  EXPECT_TRUE(all_close(a, {0.9, 0.9}, 1e-6, 1e-6));
  EXPECT_TRUE(all_close(b, {0.99, 0.99}, 1e-6, 1e-6));
  EXPECT_TRUE(all_close(c, {1.0}, 0.0, 0.0));
  EXPECT_HAS(error_of([&] { adam.add_param_group({a}, {}); }), "appears more than once");
  EXPECT_HAS(error_of([&] { adam.add_param_group({c * 1.0}, {}); }), "not a leaf");
  EXPECT_HAS(error_of([&] { adam.add_param_group({zeros({1})}, {.lr = -1.0}); }), "[Adam] lr");
  EXPECT_EQ(adam.num_param_groups(), 3u);
  // The groups round-trip through state_dict.
  StateDict state = adam.state_dict();
  EXPECT_TRUE(state.contains("param_groups.2.lr"));
}

}  // namespace
}  // namespace tessera::testing
