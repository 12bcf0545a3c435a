// Tessera's half of the side-by-side benchmarks; torch_bench.cpp runs the
// same workloads through libtorch. bench/compare.py runs both and prints
// Tessera/PyTorch ratios.

#include <benchmark/benchmark.h>
#include <cblas.h>

#include <cstring>
#include <vector>

#include "tessera/core/view_check.h"
#include "tessera/tessera.h"

using namespace tessera;

namespace {

void set_bytes(benchmark::State& state, int64_t bytes_per_iteration) {
  state.SetBytesProcessed(state.iterations() * bytes_per_iteration);
}

// Dispatch overhead: one-element add.
void BM_add_1(benchmark::State& state) {
  Tensor a = ones({1}), b = ones({1});
  for (auto _ : state) benchmark::DoNotOptimize(add(a, b));
}
BENCHMARK(BM_add_1);

void BM_add(benchmark::State& state) {
  Tensor a = rand({state.range(0)}), b = rand({state.range(0)});
  for (auto _ : state) benchmark::DoNotOptimize(add(a, b));
  set_bytes(state, 3 * 4 * state.range(0));
}
BENCHMARK(BM_add)->Arg(1 << 20)->Arg(1 << 24)->UseRealTime();

void BM_mul(benchmark::State& state) {
  Tensor a = rand({state.range(0)}), b = rand({state.range(0)});
  for (auto _ : state) benchmark::DoNotOptimize(mul(a, b));
  set_bytes(state, 3 * 4 * state.range(0));
}
BENCHMARK(BM_mul)->Arg(1 << 20)->Arg(1 << 24)->UseRealTime();

void BM_gelu(benchmark::State& state) {
  Tensor a = randn({state.range(0)});
  for (auto _ : state) benchmark::DoNotOptimize(gelu(a));
  set_bytes(state, 2 * 4 * state.range(0));
}
BENCHMARK(BM_gelu)->Arg(1 << 20)->Arg(1 << 24)->UseRealTime();

// The machine's copy bandwidth (read + write) with all threads, the
// yardstick for elementwise ops.
void BM_memcpy(benchmark::State& state) {
  std::vector<float> source(state.range(0), 1.0f), target(state.range(0), 0.0f);
  for (auto _ : state) {
    parallel_for(0, state.range(0), 1 << 16, [&](int64_t lo, int64_t hi) {
      std::memcpy(target.data() + lo, source.data() + lo, (hi - lo) * sizeof(float));
    });
    benchmark::ClobberMemory();
  }
  set_bytes(state, 2 * 4 * state.range(0));
}
BENCHMARK(BM_memcpy)->Arg(1 << 24)->UseRealTime();

void BM_matmul(benchmark::State& state) {
  int64_t n = state.range(0);
  Tensor a = rand({n, n}), b = rand({n, n});
  for (auto _ : state) benchmark::DoNotOptimize(matmul(a, b));
  state.counters["GFLOP/s"] = benchmark::Counter(2.0 * n * n * n, benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_matmul)->Arg(256)->Arg(1024)->Arg(2048)->UseRealTime();

// OpenBLAS called directly, outputs preallocated: the ceiling for matmul.
void BM_openblas_sgemm(benchmark::State& state) {
  int n = static_cast<int>(state.range(0));
  std::vector<float> a(n * n, 0.5f), b(n * n, 0.25f), c(n * n);
  for (auto _ : state) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a.data(), n, b.data(), n,
                0.0f, c.data(), n);
    benchmark::ClobberMemory();
  }
  state.counters["GFLOP/s"] = benchmark::Counter(2.0 * n * n * n, benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_openblas_sgemm)->Arg(256)->Arg(1024)->Arg(2048)->UseRealTime();

// View overhead: a transposed and a sliced view of a 4-d tensor (no data
// moves), and the bounds check every view makes (make_alias), alone.
void BM_view_transpose(benchmark::State& state) {
  Tensor x = rand({8, 16, 32, 64});
  for (auto _ : state) benchmark::DoNotOptimize(x.transpose(1, 2));
}
BENCHMARK(BM_view_transpose);

void BM_view_slice(benchmark::State& state) {
  Tensor x = rand({8, 16, 32, 64});
  for (auto _ : state) benchmark::DoNotOptimize(x.slice(2, 4, 28, 2));
}
BENCHMARK(BM_view_slice);

void BM_view_bounds_check(benchmark::State& state) {
  const Tensor x = rand({8, 16, 32, 64});
  const Tensor view = x.slice(2, 4, 28, 2);
  for (auto _ : state) {
    check_view_in_memory(view.shape(), view.strides(), view.offset(), x.numel());
    benchmark::ClobberMemory();
  }
}
BENCHMARK(BM_view_bounds_check);

void BM_softmax(benchmark::State& state) {
  Tensor x = randn({4096, 1024});
  for (auto _ : state) benchmark::DoNotOptimize(softmax(x, -1));
  set_bytes(state, 2 * 4 * x.numel());
}
BENCHMARK(BM_softmax)->UseRealTime();

void BM_layer_norm(benchmark::State& state) {
  Tensor x = randn({4096, 1024});
  Tensor weight = ones({1024}), bias = zeros({1024});
  for (auto _ : state) benchmark::DoNotOptimize(layer_norm(x, {1024}, weight, bias, 1e-5));
  set_bytes(state, 2 * 4 * x.numel());
}
BENCHMARK(BM_layer_norm)->UseRealTime();

// conv2d forward + backward (input, weight and bias gradients).
void BM_conv2d_train(benchmark::State& state) {
  Tensor x = randn({128, 32, 14, 14}).set_requires_grad();
  Tensor weight = (randn({64, 32, 3, 3}) * 0.1).detach().set_requires_grad();
  Tensor bias = zeros({64}).set_requires_grad();
  for (auto _ : state) {
    Tensor y = conv2d(x, weight, bias, {1, 1}, {1, 1});
    sum(y).backward();
    x.set_grad(Tensor());
    weight.set_grad(Tensor());
    bias.set_grad(Tensor());
  }
}
BENCHMARK(BM_conv2d_train)->UseRealTime()->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
