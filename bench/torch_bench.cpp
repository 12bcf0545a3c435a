// PyTorch's half of the side-by-side benchmarks, through libtorch (C++), so
// both sides are measured by the same harness without Python in the loop.
// Workload names match ops_bench.cpp.

#include <benchmark/benchmark.h>
#include <torch/torch.h>

#include <cstdlib>

namespace {

void set_bytes(benchmark::State& state, int64_t bytes_per_iteration) {
  state.SetBytesProcessed(state.iterations() * bytes_per_iteration);
}

struct Setup {
  Setup() {
    const char* threads = std::getenv("TESSERA_NUM_THREADS");
    torch::set_num_threads(threads ? std::atoi(threads) : 2);
    torch::manual_seed(0);
  }
} setup;

torch::NoGradGuard* no_grad_for_forward() { return nullptr; }

void BM_add_1(benchmark::State& state) {
  torch::NoGradGuard no_grad;
  auto a = torch::ones({1}), b = torch::ones({1});
  for (auto _ : state) benchmark::DoNotOptimize(torch::add(a, b));
}
BENCHMARK(BM_add_1);

void BM_add(benchmark::State& state) {
  torch::NoGradGuard no_grad;
  auto a = torch::rand({state.range(0)}), b = torch::rand({state.range(0)});
  for (auto _ : state) benchmark::DoNotOptimize(torch::add(a, b));
  set_bytes(state, 3 * 4 * state.range(0));
}
BENCHMARK(BM_add)->Arg(1 << 20)->Arg(1 << 24)->UseRealTime();

void BM_mul(benchmark::State& state) {
  torch::NoGradGuard no_grad;
  auto a = torch::rand({state.range(0)}), b = torch::rand({state.range(0)});
  for (auto _ : state) benchmark::DoNotOptimize(torch::mul(a, b));
  set_bytes(state, 3 * 4 * state.range(0));
}
BENCHMARK(BM_mul)->Arg(1 << 20)->Arg(1 << 24)->UseRealTime();

void BM_gelu(benchmark::State& state) {
  torch::NoGradGuard no_grad;
  auto a = torch::randn({state.range(0)});
  for (auto _ : state) benchmark::DoNotOptimize(torch::gelu(a));
  set_bytes(state, 2 * 4 * state.range(0));
}
BENCHMARK(BM_gelu)->Arg(1 << 20)->Arg(1 << 24)->UseRealTime();

void BM_matmul(benchmark::State& state) {
  torch::NoGradGuard no_grad;
  int64_t n = state.range(0);
  auto a = torch::rand({n, n}), b = torch::rand({n, n});
  for (auto _ : state) benchmark::DoNotOptimize(torch::matmul(a, b));
  state.counters["GFLOP/s"] =
      benchmark::Counter(2.0 * n * n * n, benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_matmul)->Arg(256)->Arg(1024)->Arg(2048)->UseRealTime();

void BM_view_transpose(benchmark::State& state) {
  torch::NoGradGuard no_grad;
  auto x = torch::rand({8, 16, 32, 64});
  for (auto _ : state) benchmark::DoNotOptimize(x.transpose(1, 2));
}
BENCHMARK(BM_view_transpose);

void BM_view_slice(benchmark::State& state) {
  torch::NoGradGuard no_grad;
  auto x = torch::rand({8, 16, 32, 64});
  for (auto _ : state) benchmark::DoNotOptimize(x.slice(2, 4, 28, 2));
}
BENCHMARK(BM_view_slice);

void BM_softmax(benchmark::State& state) {
  torch::NoGradGuard no_grad;
  auto x = torch::randn({4096, 1024});
  for (auto _ : state) benchmark::DoNotOptimize(torch::softmax(x, -1));
  set_bytes(state, 2 * 4 * x.numel());
}
BENCHMARK(BM_softmax)->UseRealTime();

void BM_layer_norm(benchmark::State& state) {
  torch::NoGradGuard no_grad;
  auto x = torch::randn({4096, 1024});
  auto weight = torch::ones({1024}), bias = torch::zeros({1024});
  for (auto _ : state) {
    benchmark::DoNotOptimize(torch::layer_norm(x, {1024}, weight, bias, 1e-5));
  }
  set_bytes(state, 2 * 4 * x.numel());
}
BENCHMARK(BM_layer_norm)->UseRealTime();

// conv2d forward + backward (input and weight gradients) on the shape.
void BM_conv2d_train(benchmark::State& state) {
  auto x = torch::randn({128, 32, 14, 14}).requires_grad_(true);
  auto weight = (torch::randn({64, 32, 3, 3}) * 0.1).requires_grad_(true);
  auto bias = torch::zeros({64}).requires_grad_(true);
  for (auto _ : state) {
    auto y = torch::conv2d(x, weight, bias, 1, 1);
    y.sum().backward();
    x.mutable_grad().reset();
    weight.mutable_grad().reset();
    bias.mutable_grad().reset();
  }
}
BENCHMARK(BM_conv2d_train)->UseRealTime()->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
