// Tessera's side of the collective benchmarks (bench/collectives_compare.py
// runs it under tessera-run (Gloo) and mpirun (MPI) next to
// bench/collectives_torch.py). Every rank times all_reduce, all_gather,
// reduce_scatter and all_to_all of 1, 16 and 64 MiB of f32 (the size of one
// rank's input);
// rank 0 prints one JSON line per case with the backend and the median
// seconds over the timed repetitions.
//
//   tessera-run -n 2 ./build/bench/collectives_bench [--repetitions 10]
//   mpirun -n 2 ./build/bench/collectives_bench     (the MPI backend)
//   TESSERA_BACKEND=nccl tessera-run -n 2 ./build/bench/collectives_bench
//                                    (NCCL: the inputs live on each rank's GPU)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "tessera/tessera.h"

using namespace tessera;
using namespace tessera::distributed;

namespace {

template <typename Fn>
double median_seconds(Group& group, int repetitions, Fn&& fn) {
  fn();  // warm-up: connections, buffers
  std::vector<double> times;
  for (int i = 0; i < repetitions; ++i) {
    group.barrier();
    const auto start = std::chrono::steady_clock::now();
    fn();
    times.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  // The slowest rank decides when a collective is done.
  Tensor slowest = Tensor::from_vector(times, {static_cast<int64_t>(times.size())});
  group.all_reduce(slowest, ReduceOp::max);
  std::vector<double> maxima = slowest.to_vector<double>();
  std::sort(maxima.begin(), maxima.end());
  return maxima[maxima.size() / 2];
}

// A fresh copy of `input` on its device (CUDA tensors have no clone kernel yet).
Tensor fresh_copy(const Tensor& input) {
  if (input.device().type == DeviceType::cpu) return input.clone();
  Tensor copy = Tensor::empty(input.shape(), input.dtype(), input.device());
  copy.copy_(input);
  return copy;
}

}  // namespace

int main(int argc, char** argv) {
  int repetitions = 10;
  for (int i = 1; i + 1 < argc; ++i)
    if (std::strcmp(argv[i], "--repetitions") == 0) repetitions = std::max(1, std::atoi(argv[i + 1]));
  try {
    const char* backend = backend_name(backend_from_env());
    std::shared_ptr<Group> group = init_process_group();
    // The device init_process_group gives an NCCL rank; the CPU otherwise.
    Device device;
    if (backend_from_env() == Backend::nccl) {
      device = Device{DeviceType::cuda, Environment::from_env().local_rank % cuda::device_count()};
    }
    const int world = group->size();
    for (int64_t mib : {1, 16, 64}) {
      const int64_t count = mib * (int64_t{1} << 20) / 4;
      Tensor input = full({count}, static_cast<double>(group->rank() + 1)).to(device);
      std::vector<Tensor> pieces;
      for (int r = 0; r < world; ++r) pieces.push_back(full({count / world}, 1.0).to(device));
      const double reduce = median_seconds(*group, repetitions, [&] {
        Tensor buffer = fresh_copy(input);
        group->all_reduce(buffer, ReduceOp::sum);
      });
      const double gather = median_seconds(*group, repetitions, [&] { group->all_gather(input); });
      const double scatter = median_seconds(*group, repetitions,
                                            [&] { group->reduce_scatter(pieces, ReduceOp::sum); });
      const double exchange =
          median_seconds(*group, repetitions, [&] { (void)group->all_to_all(pieces); });
      if (group->rank() == 0) {
        for (auto [op, seconds] : {std::pair<const char*, double>{"all_reduce", reduce},
                                   {"all_gather", gather},
                                   {"reduce_scatter", scatter},
                                   {"all_to_all", exchange}}) {
          std::printf("{\"framework\": \"tessera\", \"backend\": \"%s\", \"op\": \"%s\", "
                      "\"mib\": %lld, \"ranks\": %d, \"seconds\": %.6f}\n",
                      backend, op, static_cast<long long>(mib), world, seconds);
        }
        std::fflush(stdout);
      }
    }
  } catch (const std::exception& error) {
    std::fprintf(stderr, "collectives_bench: %s\n", error.what());
    return 1;
  }
  return 0;
}
