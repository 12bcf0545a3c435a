// Tessera's half of the side-by-side benchmarks; torch_bench.cpp runs the
// same workloads through libtorch. bench/compare.py runs both and prints
// Tessera/PyTorch ratios.

#include <benchmark/benchmark.h>
#include <cblas.h>

#include <cstring>
#include <vector>

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

// The machine's copy bandwidth (read + write), the yardstick for elementwise ops.
void BM_memcpy(benchmark::State& state) {
  std::vector<float> source(state.range(0), 1.0f), target(state.range(0), 0.0f);
  for (auto _ : state) {
    std::memcpy(target.data(), source.data(), source.size() * sizeof(float));
    benchmark::ClobberMemory();
  }
  set_bytes(state, 2 * 4 * state.range(0));
}
BENCHMARK(BM_memcpy)->Arg(1 << 24)->UseRealTime();

#ifdef TESSERA_BENCH_HAS_MATMUL
void BM_matmul(benchmark::State& state) {
  int64_t n = state.range(0);
  Tensor a = rand({n, n}), b = rand({n, n});
  for (auto _ : state) benchmark::DoNotOptimize(matmul(a, b));
  state.counters["GFLOP/s"] = benchmark::Counter(2.0 * n * n * n, benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_matmul)->Arg(256)->Arg(1024)->Arg(2048)->UseRealTime();
#endif

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

}  // namespace

BENCHMARK_MAIN();
