// Data-parallel training step, with parameters broadcast and the batch
// split: the gradient all-reduce comes from boxing, not from DDP-style code.
// Models: the MLP 784-1024-1024-10 (batch 256 over all ranks) or ResNet-8
// (examples/models/resnet.h, batch 128 of 3x32x32; BatchNorm with global
// statistics, or per-rank ones as DDP with --bn per-rank), SGD with
// momentum; or the GPT of bench/train_bench (4 layers, d 256, batch 16 x 128
// tokens), AdamW. With --compile 1 the whole step (forward, backward with
// its gradient all-reduces, update) runs as a compiled graph
// (graph::compile). Runs under tessera-run; rank 0 prints one JSON line
// with the median step time (of the slowest rank) and the last loss.
// bench/dp_torch.py is the PyTorch DDP twin.
//
//   tessera-run -n 2 ./build/bench/dp_bench [--model mlp|resnet|gpt] [--bn global|per-rank]
//                                           [--compile 0|1] [--steps 30] [--warmup 5]

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "examples/models/gpt.h"
#include "examples/models/resnet.h"
#include "tessera/tessera.h"

using namespace tessera;

int main(int argc, char** argv) {
  int steps = 30, warmup = 5;
  std::string model_name = "mlp", bn = "global";
  bool compiled = false;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--steps") == 0) steps = std::atoi(argv[i + 1]);
    if (std::strcmp(argv[i], "--warmup") == 0) warmup = std::atoi(argv[i + 1]);
    if (std::strcmp(argv[i], "--model") == 0) model_name = argv[i + 1];
    if (std::strcmp(argv[i], "--bn") == 0) bn = argv[i + 1];
    if (std::strcmp(argv[i], "--compile") == 0) compiled = std::atoi(argv[i + 1]) != 0;
  }
  if ((model_name != "mlp" && model_name != "resnet" && model_name != "gpt") ||
      (bn != "global" && bn != "per-rank")) {
    std::fprintf(stderr, "dp_bench: --model is mlp, resnet or gpt, --bn global or per-rank\n");
    return 2;
  }
  const bool resnet = model_name == "resnet", gpt = model_name == "gpt";
  try {
    auto world = distributed::init_process_group();
    const Placement all = Placement::cpu(world->size());
    manual_seed(0);
    std::shared_ptr<nn::Module> model;
    if (resnet) {
      model = std::make_shared<models::ResNet>();
    } else if (gpt) {
      model = std::make_shared<models::GPT>(models::GPTConfig{});
    } else {
      model = std::make_shared<nn::Sequential>(std::initializer_list<std::shared_ptr<nn::Module>>{
          std::make_shared<nn::Linear>(784, 1024), std::make_shared<nn::ReLU>(),
          std::make_shared<nn::Linear>(1024, 1024), std::make_shared<nn::ReLU>(),
          std::make_shared<nn::Linear>(1024, 10)});
    }
    global::parallelize(*model, all, {});
    if (bn == "per-rank") {
      model->apply([](nn::Module& module) {
        if (auto* norm = dynamic_cast<nn::BatchNorm*>(&module)) norm->set_per_rank_statistics();
      });
    }
    std::unique_ptr<optim::Optimizer> optimizer;
    if (gpt) {
      optimizer =
          std::make_unique<optim::AdamW>(model->parameters(), optim::AdamWOptions{.lr = 3e-4});
    } else {
      optimizer = std::make_unique<optim::SGD>(model->parameters(),
                                               optim::SGDOptions{.lr = 0.01, .momentum = 0.9});
    }
    // Each rank's part of the batch, as data loaders would hand it out.
    const int64_t batch = std::getenv("DP_BENCH_BATCH") ? std::atoll(std::getenv("DP_BENCH_BATCH"))
                                                        : (resnet ? 128
                                                           : gpt  ? 16
                                                                  : 256);
    const global::Range rows = global::split_range(batch, world->size(), world->rank());
    Generator gen(1 + static_cast<uint64_t>(world->rank()));
    const Shape sample = resnet ? Shape{3, 32, 32} : Shape{784};
    Shape shape{rows.size};
    shape.insert(shape.end(), sample.begin(), sample.end());
    Tensor x, y;
    if (gpt) {
      x = randint(0, 256, {rows.size, 128}, DType::i64, &gen).to_global(all, Sbp::split(0));
      y = randint(0, 256, {rows.size, 128}, DType::i64, &gen).to_global(all, Sbp::split(0));
    } else {
      x = randn(shape, DType::f32, &gen).to_global(all, Sbp::split(0));
      y = randint(0, 10, {rows.size}, DType::i64, &gen).to_global(all, Sbp::split(0));
    }
    auto loss_of = [gpt](const Tensor& logits, const Tensor& targets) {
      return gpt ? cross_entropy(logits.reshape({-1, logits.size(-1)}), targets.reshape({-1}))
                 : cross_entropy(logits, targets);
    };
    auto train_step = [&](const TensorVector& batch_in) -> TensorVector {
      optimizer->zero_grad();
      Tensor loss = loss_of(model->forward(batch_in[0]), batch_in[1]);
      loss.backward();
      optimizer->step();
      return {loss};
    };
    graph::CompiledFunction compiled_step = graph::compile(train_step);
    std::vector<double> times, forward_ms, backward_ms, update_ms;
    const bool phases = std::getenv("DP_BENCH_PHASES") != nullptr && !compiled;
    double loss_value = 0;
    for (int step = 0; step < warmup + steps; ++step) {
      world->barrier();
      const auto start = std::chrono::steady_clock::now();
      Tensor loss;
      auto forward_end = start, backward_end = start;
      if (compiled) {
        loss = compiled_step({x, y})[0];
      } else {
        optimizer->zero_grad();
        loss = loss_of(model->forward(x), y);
        forward_end = std::chrono::steady_clock::now();
        loss.backward();
        backward_end = std::chrono::steady_clock::now();
        optimizer->step();
      }
      if (phases && step >= warmup) {
        const auto step_end = std::chrono::steady_clock::now();
        forward_ms.push_back(1e3 * std::chrono::duration<double>(forward_end - start).count());
        backward_ms.push_back(1e3 * std::chrono::duration<double>(backward_end - forward_end).count());
        update_ms.push_back(1e3 * std::chrono::duration<double>(step_end - backward_end).count());
      }
      const double seconds =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      if (step >= warmup) times.push_back(seconds);
      if (step + 1 == warmup + steps) loss_value = loss.item<double>();
    }
    Tensor slowest = Tensor::from_vector(times, {static_cast<int64_t>(times.size())});
    world->all_reduce(slowest, distributed::ReduceOp::max);
    std::vector<double> sorted = slowest.to_vector<double>();
    std::sort(sorted.begin(), sorted.end());
    if (phases) {
      std::sort(forward_ms.begin(), forward_ms.end());
      std::sort(backward_ms.begin(), backward_ms.end());
      std::sort(update_ms.begin(), update_ms.end());
      std::printf("rank %d: forward %.2f ms, backward %.2f ms, optimizer step %.2f ms (medians)\n",
                  world->rank(), forward_ms[forward_ms.size() / 2],
                  backward_ms[backward_ms.size() / 2], update_ms[update_ms.size() / 2]);
    }
    if (world->rank() == 0) {
      std::printf(
          "{\"framework\": \"tessera\", \"ranks\": %d, \"compiled\": %s, \"step_ms\": %.3f, "
          "\"loss\": %.5f}\n",
          world->size(), compiled ? "true" : "false", 1e3 * sorted[sorted.size() / 2], loss_value);
    }
    return 0;
  } catch (const std::exception& error) {
    std::fprintf(stderr, "dp_bench: %s\n", error.what());
    return 1;
  }
}
