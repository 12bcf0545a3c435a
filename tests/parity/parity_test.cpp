// Parity with PyTorch: the same weights and inputs in a Tessera model and a
// PyTorch model give the same output, loss and parameter gradients, and 50
// optimizer steps give the same parameters. PyTorch's numbers come from
// tests/parity/torch_reference.py, run once per test binary.

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include "examples/models/cnn.h"
#include "tessera/tessera.h"

namespace tessera {
namespace {

namespace fs = std::filesystem;

// Generates the reference files; returns "" on success or why not.
std::string generate_reference(const fs::path& outdir) {
  const char* python = std::getenv("TESSERA_TORCH_PYTHON");
  std::string interpreter = python ? python : "/usr/bin/python3";
  if (std::system((interpreter + " -c 'import torch' 2>/dev/null").c_str()) != 0) {
    return interpreter + " cannot import torch (Debian package python3-torch)";
  }
  const fs::path script = fs::path(TESSERA_SOURCE_DIR) / "tests/parity/torch_reference.py";
  const std::string command = interpreter + " " + script.string() + " " + outdir.string();
  if (std::system(command.c_str()) != 0) return "failed: " + command;
  return "";
}

class Parity : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    outdir_ = new fs::path(fs::temp_directory_path() /
                           ("tessera_parity_" + std::to_string(::getpid())));
    skip_reason_ = new std::string(generate_reference(*outdir_));
  }
  static void TearDownTestSuite() {
    std::error_code ignored;
    fs::remove_all(*outdir_, ignored);
    delete outdir_;
    delete skip_reason_;
  }
  void SetUp() override {
    if (!skip_reason_->empty()) {
      // CI sets TESSERA_REQUIRE_TORCH so a missing PyTorch fails instead of skipping.
      if (std::getenv("TESSERA_REQUIRE_TORCH")) FAIL() << *skip_reason_;
      GTEST_SKIP() << *skip_reason_;
    }
  }
  static StateDict load(const std::string& name) {
    return io::load_safetensors((*outdir_ / (name + ".safetensors")).string()).tensors;
  }

  static fs::path* outdir_;
  static std::string* skip_reason_;
};
fs::path* Parity::outdir_ = nullptr;
std::string* Parity::skip_reason_ = nullptr;

// max |actual - expected| / max |expected|: the relative error of the tensor
// as a whole, robust to individual entries near zero.
double relative_error(const Tensor& actual, const Tensor& expected) {
  EXPECT_EQ(actual.shape(), expected.shape());
  Tensor a = actual.to(DType::f64), e = expected.to(DType::f64);
  const double scale = max(abs(e)).item<double>();
  const double diff = max(abs(sub(a, e))).item<double>();
  return scale > 0 ? diff / scale : diff;
}

void expect_gradients_match(nn::Module& model, const StateDict& reference) {
  for (const auto& [name, param] : model.named_parameters()) {
    ASSERT_TRUE(param.grad().defined()) << name << " has no gradient";
    EXPECT_LE(relative_error(param.grad(), reference.at("grad." + name)), 1e-4) << name;
  }
}

void check_forward_backward(nn::Module& model, const StateDict& reference, const Tensor& output,
                            const Tensor& loss) {
  EXPECT_LE(relative_error(output, reference.at("output")), 1e-4);
  EXPECT_LE(relative_error(loss, reference.at("loss")), 1e-4);
  loss.backward();
  expect_gradients_match(model, reference);
}

TEST_F(Parity, MlpForwardLossAndGradients) {
  StateDict reference = load("mlp");
  auto model = std::make_shared<nn::Sequential>(std::initializer_list<std::shared_ptr<nn::Module>>{
      std::make_shared<nn::Linear>(784, 256), std::make_shared<nn::ReLU>(),
      std::make_shared<nn::Linear>(256, 128), std::make_shared<nn::ReLU>(),
      std::make_shared<nn::Linear>(128, 10)});
  model->load_state_dict(reference.with_prefix_removed("model."));
  Tensor output = model->forward(reference.at("input"));
  Tensor loss = nn::CrossEntropyLoss()(output, reference.at("target"));
  check_forward_backward(*model, reference, output, loss);
}

TEST_F(Parity, CnnForwardLossAndGradients) {
  StateDict reference = load("cnn");
  auto model = models::make_cnn();
  model->load_state_dict(reference.with_prefix_removed("model."));
  Tensor output = model->forward(reference.at("input"));
  Tensor loss = nn::CrossEntropyLoss()(output, reference.at("target"));
  check_forward_backward(*model, reference, output, loss);
}

TEST_F(Parity, CausalTransformerBlockForwardLossAndGradients) {
  StateDict reference = load("block");
  nn::TransformerBlock block(64, 4, 256, 0.0, /*causal=*/true);
  block.load_state_dict(reference.with_prefix_removed("model.layer."));
  Tensor output = block.forward(reference.at("input"));
  Tensor loss = nn::MSELoss()(output, reference.at("target"));
  // Gradients are keyed like the PyTorch wrapper's parameters ("layer.x").
  StateDict grads;
  for (const auto& [key, value] : reference.with_prefix_removed("grad.layer.")) {
    grads.insert("grad." + key, value);
  }
  grads.insert("output", reference.at("output"));
  grads.insert("loss", reference.at("loss"));
  check_forward_backward(block, grads, output, loss);
}

// Trains the MLP from the reference's start weights on its 50 batches, in
// `dtype`, and compares the final parameters with the reference run `run`.
template <typename MakeOptimizer>
void check_optimizer_run(const StateDict& reference, const std::string& run,
                         MakeOptimizer make_optimizer, DType dtype = DType::f32,
                         double tolerance = 1e-3) {
  auto model = std::make_shared<nn::Sequential>(std::initializer_list<std::shared_ptr<nn::Module>>{
      std::make_shared<nn::Linear>(784, 256), std::make_shared<nn::ReLU>(),
      std::make_shared<nn::Linear>(256, 128), std::make_shared<nn::ReLU>(),
      std::make_shared<nn::Linear>(128, 10)});
  model->load_state_dict(reference.with_prefix_removed("model."));
  model->to(dtype);
  auto optimizer = make_optimizer(model->parameters());
  const Tensor inputs = reference.at("inputs").to(dtype);
  const Tensor& targets = reference.at("targets");
  for (int64_t step = 0; step < inputs.size(0); ++step) {
    optimizer.zero_grad();
    nn::CrossEntropyLoss()(model->forward(inputs.select(0, step)), targets.select(0, step))
        .backward();
    optimizer.step();
  }
  for (const auto& [name, param] : model->named_parameters()) {
    EXPECT_LE(relative_error(param, reference.at(run + "." + name)), tolerance)
        << run << " " << name;
  }
}

TEST_F(Parity, FiftyStepsOfSgdWithMomentum) {
  check_optimizer_run(load("optimizers"), "sgd", [](std::vector<Tensor> params) {
    return optim::SGD(params, {.lr = 0.05, .momentum = 0.9});
  });
}

// Adam divides by sqrt(v) + 1e-8, so gradients that are nearly zero (units
// that rarely fire) get steps of full size whose direction rests on f32
// rounding: PyTorch in f32 itself ends 1.5e-3 away from PyTorch in f64 on
// this run. So Tessera is held to the exact (f64) trajectory: within 1e-3 in
// f32 (it lands within 5e-5), and within 1e-9 when it also runs in f64.
TEST_F(Parity, FiftyStepsOfAdamW) {
  auto make = [](std::vector<Tensor> params) {
    return optim::AdamW(params, {.lr = 1e-3, .weight_decay = 0.01});
  };
  const StateDict reference = load("optimizers");
  check_optimizer_run(reference, "adamw_f64", make, DType::f32, 1e-3);
  check_optimizer_run(reference, "adamw_f64", make, DType::f64, 1e-9);
}

}  // namespace
}  // namespace tessera
