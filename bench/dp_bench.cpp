// Data-parallel training step of the MLP 784-1024-1024-10 (batch 256 over
// all ranks, SGD with momentum), with parameters broadcast and the batch
// split: the gradient all-reduce comes from boxing, not from DDP-style code.
// Runs under tessera-run; rank 0 prints one JSON line with the median step
// time (of the slowest rank) and the last loss. bench/dp_torch.py is the
// PyTorch DDP twin.
//
//   tessera-run -n 2 ./build/bench/dp_bench [--steps 30] [--warmup 5]

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "tessera/tessera.h"

using namespace tessera;

int main(int argc, char** argv) {
  int steps = 30, warmup = 5;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--steps") == 0) steps = std::atoi(argv[i + 1]);
    if (std::strcmp(argv[i], "--warmup") == 0) warmup = std::atoi(argv[i + 1]);
  }
  try {
    auto world = distributed::init_process_group();
    const Placement all = Placement::cpu(world->size());
    manual_seed(0);
    auto model = std::make_shared<nn::Sequential>(std::initializer_list<std::shared_ptr<nn::Module>>{
        std::make_shared<nn::Linear>(784, 1024), std::make_shared<nn::ReLU>(),
        std::make_shared<nn::Linear>(1024, 1024), std::make_shared<nn::ReLU>(),
        std::make_shared<nn::Linear>(1024, 10)});
    global::parallelize(*model, all, {});
    optim::SGD optimizer(model->parameters(), {.lr = 0.01, .momentum = 0.9});
    // Each rank's part of the batch, as data loaders would hand it out.
    const int64_t batch = std::getenv("DP_BENCH_BATCH") ? std::atoll(std::getenv("DP_BENCH_BATCH")) : 256;
    const global::Range rows = global::split_range(batch, world->size(), world->rank());
    Generator gen(1 + static_cast<uint64_t>(world->rank()));
    Tensor x = randn({rows.size, 784}, DType::f32, &gen).to_global(all, Sbp::split(0));
    Tensor y = randint(0, 10, {rows.size}, DType::i64, &gen).to_global(all, Sbp::split(0));
    std::vector<double> times, forward_ms, backward_ms, update_ms;
    const bool phases = std::getenv("DP_BENCH_PHASES") != nullptr;
    double loss_value = 0;
    for (int step = 0; step < warmup + steps; ++step) {
      world->barrier();
      const auto start = std::chrono::steady_clock::now();
      optimizer.zero_grad();
      Tensor loss = cross_entropy(model->forward(x), y);
      const auto forward_end = std::chrono::steady_clock::now();
      loss.backward();
      const auto backward_end = std::chrono::steady_clock::now();
      optimizer.step();
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
      std::printf("{\"framework\": \"tessera\", \"ranks\": %d, \"step_ms\": %.3f, \"loss\": %.5f}\n",
                  world->size(), 1e3 * sorted[sorted.size() / 2], loss_value);
    }
    return 0;
  } catch (const std::exception& error) {
    std::fprintf(stderr, "dp_bench: %s\n", error.what());
    return 1;
  }
}
