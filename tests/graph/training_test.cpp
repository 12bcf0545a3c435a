// Compiled training steps: forward, backward and the optimizer update traced
// into one graph give eager's losses and parameters, step after step.

#include <map>

#include "examples/models/cnn.h"
#include "examples/models/gpt.h"
#include "tessera/global/parallel.h"
#include "tessera/graph/compile.h"
#include "testing.h"
#include "training_run.h"

namespace tessera::testing {
namespace {

using LossFn = std::function<Tensor(const Tensor&, const Tensor&)>;

using Run = TrainingRun;

// `steps` steps of one model, eagerly or compiled, from the same seed.
template <typename MakeModel, typename MakeOptimizer>
Run train(MakeModel make_model, MakeOptimizer make_optimizer, const LossFn& loss_fn,
          const std::vector<std::pair<Tensor, Tensor>>& batches, bool compiled, int steps) {
  manual_seed(11);
  auto model = make_model();
  auto optimizer = make_optimizer(model->parameters());
  auto step = [&](const TensorVector& in) -> TensorVector {
    optimizer->zero_grad();
    Tensor loss = loss_fn(model->forward(in[0]), in[1]);
    loss.backward();
    optimizer->step();
    return {loss};
  };
  auto compiled_step = graph::compile(step);
  Run run;
  for (int i = 0; i < steps; ++i) {
    const auto& [x, y] = batches[static_cast<size_t>(i) % batches.size()];
    const int64_t allocations_before = CpuAllocator::instance().stats().allocations;
    Tensor loss = compiled ? compiled_step({x, y})[0] : step({x, y})[0];
    run.allocations.push_back(CpuAllocator::instance().stats().allocations - allocations_before);
    run.losses.push_back(loss.item<double>());
  }
  if (compiled) {
    EXPECT_EQ(compiled_step.compiles(), 1);
  }
  for (const Tensor& p : model->parameters()) run.params.push_back(p.clone());
  return run;
}

std::vector<std::pair<Tensor, Tensor>> class_batches(const Shape& shape, int count) {
  std::vector<std::pair<Tensor, Tensor>> batches;
  for (int i = 0; i < count; ++i) {
    manual_seed(100 + static_cast<uint64_t>(i));
    batches.emplace_back(randn(shape), randint(0, 10, {shape[0]}));
  }
  return batches;
}

// A compiled step runs from its arena: once it has run eagerly, traced and
// learned its kernels' scratch sizes (the first three calls), each call
// takes one block from the allocator, the loss it returns. A kernel that
// allocates its own scratch memory fails this.
void expect_only_the_loss_allocated(const Run& compiled) {
  for (size_t i = 3; i < compiled.allocations.size(); ++i)
    EXPECT_EQ(compiled.allocations[i], 1) << "step " << i;
}

// 20 steps eagerly and 20 compiled from the same seed: the same losses
// and parameters, bit for bit, and a compiled run that allocates only the
// loss it returns.
template <typename MakeModel, typename MakeOptimizer>
void expect_compiled_matches_eager(MakeModel make_model, MakeOptimizer make_optimizer,
                                   const LossFn& loss_fn,
                                   const std::vector<std::pair<Tensor, Tensor>>& batches) {
  const TrainingRun eager = train(make_model, make_optimizer, loss_fn, batches, false, 20);
  const TrainingRun compiled = train(make_model, make_optimizer, loss_fn, batches, true, 20);
  expect_same_run(eager, compiled);
  expect_only_the_loss_allocated(compiled);
}

LossFn cross_entropy_loss() {
  return [](const Tensor& logits, const Tensor& y) { return cross_entropy(logits, y); };
}

TEST(GraphTraining, MlpWithSgdMomentumMatchesEagerBitForBit) {
  auto make_model = [] {
    return std::make_shared<nn::Sequential>(std::initializer_list<std::shared_ptr<nn::Module>>{
        std::make_shared<nn::Linear>(64, 128), std::make_shared<nn::ReLU>(),
        std::make_shared<nn::Linear>(128, 128), std::make_shared<nn::ReLU>(),
        std::make_shared<nn::Linear>(128, 10)});
  };
  auto make_optimizer = [](const std::vector<Tensor>& params) {
    return std::make_unique<optim::SGD>(params, optim::SGDOptions{.lr = 0.05, .momentum = 0.9});
  };
  const auto batches = class_batches({32, 64}, 3);
  expect_compiled_matches_eager(make_model, make_optimizer, cross_entropy_loss(), batches);
}

TEST(GraphTraining, CnnWithSgdMatchesEagerBitForBit) {
  auto make_model = [] { return models::make_cnn(); };
  auto make_optimizer = [](const std::vector<Tensor>& params) {
    return std::make_unique<optim::SGD>(params, optim::SGDOptions{.lr = 0.01, .momentum = 0.9});
  };
  const auto batches = class_batches({8, 1, 28, 28}, 2);
  expect_compiled_matches_eager(make_model, make_optimizer, cross_entropy_loss(), batches);
}

TEST(GraphTraining, GptWithAdamWAndDropoutMatchesEagerBitForBit) {
  // Dropout draws afresh each run, and AdamW's bias correction advances
  // with the step count, as eager's do.
  const models::GPTConfig config{
      .vocab_size = 32, .context = 16, .d_model = 32, .heads = 2, .layers = 2, .dropout = 0.1};
  auto make_model = [&] { return std::make_shared<models::GPT>(config); };
  auto make_optimizer = [](const std::vector<Tensor>& params) {
    return std::make_unique<optim::AdamW>(params, optim::AdamWOptions{.lr = 1e-2});
  };
  LossFn loss_fn = [](const Tensor& logits, const Tensor& y) {
    return cross_entropy(logits.reshape({-1, logits.size(-1)}), y.reshape({-1}));
  };
  std::vector<std::pair<Tensor, Tensor>> batches;
  for (int i = 0; i < 2; ++i) {
    manual_seed(200 + static_cast<uint64_t>(i));
    batches.emplace_back(randint(0, 32, {4, 16}), randint(0, 32, {4, 16}));
  }
  expect_compiled_matches_eager(make_model, make_optimizer, loss_fn, batches);
}

TEST(GraphTraining, AGlobalStepTracesIntoShardsAndMatchesEagerGlobal) {
  // Parameters and batch as global tensors (one rank here; 2, 3 and 4 ranks
  // in GlobalJobTest.CompiledTrainingEqualsEagerGlobal): the graph's values
  // are this rank's shards, and the step's outputs are global again.
  const Placement one = Placement::cpu(1);
  auto make_model = [&] {
    auto model =
        std::make_shared<nn::Sequential>(std::initializer_list<std::shared_ptr<nn::Module>>{
            std::make_shared<nn::Linear>(16, 32), std::make_shared<nn::ReLU>(),
            std::make_shared<nn::Linear>(32, 10)});
    global::parallelize(*model, one, {{"0", global::TpStyle::column}, {"2", global::TpStyle::row}},
                        0);
    return model;
  };
  auto make_optimizer = [](const std::vector<Tensor>& params) {
    return std::make_unique<optim::SGD>(params, optim::SGDOptions{.lr = 0.05, .momentum = 0.9});
  };
  LossFn loss_fn = [&](const Tensor& logits, const Tensor& y) {
    return cross_entropy(logits, y.to_global(one, Sbp::broadcast()));
  };
  std::vector<std::pair<Tensor, Tensor>> batches;
  for (const auto& [x, y] : class_batches({8, 16}, 2)) {
    batches.emplace_back(x.to_global(one, Sbp::split(0)), y);
  }
  const auto eager = train(make_model, make_optimizer, loss_fn, batches, false, 10);
  const auto compiled = train(make_model, make_optimizer, loss_fn, batches, true, 10);
  expect_same_run(eager, compiled);
  for (const Tensor& param : compiled.params) EXPECT_TRUE(param.is_global());

  auto model = make_model();
  auto forward = graph::compile(
      [&](const TensorVector& in) -> TensorVector { return {model->forward(in[0])}; });
  const Tensor x = batches[0].first;
  (void)forward({x});
  const Tensor y = forward({x})[0];
  EXPECT_TRUE(y.is_global());
  EXPECT_EQ(y.placement(), one);
  EXPECT_TRUE(equal(y.to_local(), model->forward(x).to_local()));
  const std::string ir = forward.last_graph().str();
  EXPECT_HAS(ir, "(shard of f32[8, 16]");
  EXPECT_HAS(ir, "= variable (shard of f32[32, 16]");
  // Another SBP of the same shape is another signature.
  (void)forward({x.to_global(one, Sbp::broadcast())});
  EXPECT_EQ(forward.compiles(), 2);
}

TEST(GraphTraining, ATensorParallelGptOnOneRankMatchesEagerBitForBit) {
  // Every Linear split (vocab, column, row) on a one-rank mesh: the trace
  // runs the global layer's boxing on stand-ins (a copy that keeps a
  // transposed layout included) and must record ops, never read memory.
  const Placement one = Placement::cpu(1);
  const models::GPTConfig config{
      .vocab_size = 24, .context = 8, .d_model = 16, .heads = 4, .layers = 2, .dropout = 0.1};
  std::map<std::string, global::TpStyle> plan{{"token", global::TpStyle::vocab},
                                              {"head", global::TpStyle::column}};
  for (const std::string block : {"blocks.0.", "blocks.1."}) {
    plan[block + "linear1"] = global::TpStyle::column;
    plan[block + "linear2"] = global::TpStyle::row;
  }
  auto make_model = [&] {
    auto model = std::make_shared<models::GPT>(config);
    global::parallelize(*model, one, plan, 0);
    return model;
  };
  auto make_optimizer = [](const std::vector<Tensor>& params) {
    return std::make_unique<optim::AdamW>(params, optim::AdamWOptions{.lr = 3e-3});
  };
  LossFn loss_fn = [&](const Tensor& logits, const Tensor& y) {
    return cross_entropy(logits.reshape({-1, logits.size(-1)}),
                         y.to_global(one, Sbp::broadcast()).reshape({-1}));
  };
  std::vector<std::pair<Tensor, Tensor>> batches;
  for (int i = 0; i < 2; ++i) {
    manual_seed(300 + static_cast<uint64_t>(i));
    batches.emplace_back(randint(0, 24, {4, 8}).to_global(one, Sbp::broadcast()),
                         randint(0, 24, {4, 8}));
  }
  expect_same_run(train(make_model, make_optimizer, loss_fn, batches, false, 12),
                  train(make_model, make_optimizer, loss_fn, batches, true, 12));
}

TEST(GraphTraining, TheOptimizerKeepsCountingStepsAndReadsANewLearningRate) {
  // A compiled Adam step and an eager twin, with the learning rate changed
  // between steps as a scheduler does: no recompile, the same parameters.
  // Batches of two sizes alternate (an epoch's short last batch), so two
  // plans advance one step count.
  manual_seed(3);
  nn::Linear fc(4, 2);
  nn::Linear twin(4, 2);
  {
    NoGradGuard no_grad;
    twin.weight.copy_(fc.weight);
    twin.bias.copy_(fc.bias);
  }
  optim::Adam adam(fc.parameters(), {.lr = 0.1});
  optim::Adam twin_adam(twin.parameters(), {.lr = 0.1});
  auto step = graph::compile([&](const TensorVector& in) -> TensorVector {
    adam.zero_grad();
    Tensor loss = fc.forward(in[0]).square().mean();
    loss.backward();
    adam.step();
    return {loss};
  });
  const Tensor long_batch = randn({3, 4});
  const Tensor short_batch = randn({2, 4});
  for (int i = 0; i < 6; ++i) {
    const double lr = 0.1 / (1 + i);
    adam.set_lr(lr);
    twin_adam.set_lr(lr);
    const Tensor& x = i % 3 == 2 ? short_batch : long_batch;
    const double loss = step({x})[0].item<double>();
    twin_adam.zero_grad();
    Tensor twin_loss = twin.forward(x).square().mean();
    twin_loss.backward();
    twin_adam.step();
    EXPECT_EQ(loss, twin_loss.item<double>()) << "step " << i;
  }
  EXPECT_EQ(step.compiles(), 2);
  EXPECT_TRUE(equal(fc.weight, twin.weight));
  EXPECT_TRUE(equal(fc.bias, twin.bias));
  // The host's step count moves with the runs, as eager's would.
  EXPECT_EQ(adam.state_dict().at("state.0.step").item<int64_t>(), 6);
}

TEST(GraphTraining, GradientsLandOnTheParametersAndAccumulateWithoutZeroGrad) {
  manual_seed(5);
  nn::Linear fc(3, 2);
  auto backward = graph::compile([&](const TensorVector& in) -> TensorVector {
    Tensor loss = fc.forward(in[0]).sum();
    loss.backward();
    return {loss};
  });
  Tensor x = randn({4, 3});
  // Eager reference: three backward passes accumulate.
  nn::Linear twin(3, 2);
  {
    NoGradGuard no_grad;
    twin.weight.copy_(fc.weight);
    twin.bias.copy_(fc.bias);
  }
  for (int i = 0; i < 3; ++i) {
    twin.forward(x).sum().backward();
    backward({x});
  }
  EXPECT_EQ(backward.compiles(), 1);
  EXPECT_TRUE(equal(fc.weight.grad(), twin.weight.grad()));
  EXPECT_TRUE(equal(fc.bias.grad(), twin.bias.grad()));
  EXPECT_TRUE(all_close(fc.bias.grad(), full({2}, 12.0)));  // 3 passes of 4 rows
}

}  // namespace
}  // namespace tessera::testing
