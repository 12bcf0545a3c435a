// Graph-mode benchmark (bench/graph_compare.py runs it next to PyTorch):
// a chain of 10 elementwise ops on 1M floats, called eagerly or compiled
// (graph::compile fuses the chain into one tiled node). Prints one JSON
// line with the median seconds per call.
//
//   graph_bench chain [--compile 0|1] [--calls N] [--rounds R] [--threads T]

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "tessera/tessera.h"

using namespace tessera;

namespace {

// The chain: 10 elementwise ops, each reading the last one's result.
Tensor chain(const Tensor& x) {
  Tensor t = x * 1.5;
  t = t + 0.25;
  t = relu(t);
  t = t * 0.75;
  t = t - 0.5;
  t = abs(t);
  t = t + 1.0;
  t = sqrt(t);
  t = t * 2.0;
  return neg(t);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || std::string(argv[1]) != "chain") {
    std::fprintf(stderr, "usage: %s chain [--compile 0|1] [--calls N] [--rounds R] [--threads T]\n",
                 argv[0]);
    return 2;
  }
  bool compiled = false;
  int calls = 50, rounds = 7;
  for (int i = 2; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    const int value = std::atoi(argv[i + 1]);
    if (flag == "--compile")
      compiled = value != 0;
    else if (flag == "--calls")
      calls = value;
    else if (flag == "--rounds")
      rounds = value;
    else if (flag == "--threads" && value > 0)
      set_num_threads(value);
  }
  manual_seed(0);
  const Tensor x = randn({1 << 20});
  auto compiled_chain =
      graph::compile([](const TensorVector& in) -> TensorVector { return {chain(in[0])}; });
  auto call = [&] { return compiled ? compiled_chain({x})[0] : chain(x); };
  // The compiled chain must give the eager values.
  const Tensor reference = chain(x);
  for (int i = 0; i < 3; ++i) call();
  if (!equal(call(), reference)) {
    std::fprintf(stderr, "graph_bench: the compiled chain differs from the eager one\n");
    return 1;
  }
  std::vector<double> times;
  for (int r = 0; r < rounds; ++r) {
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < calls; ++i) call();
    times.push_back(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() / calls);
  }
  std::sort(times.begin(), times.end());
  std::printf(
      "{\"framework\": \"tessera\", \"workload\": \"chain\", \"compiled\": %s, "
      "\"call_seconds\": %.9f, \"threads\": %d}\n",
      compiled ? "true" : "false", times[times.size() / 2], num_threads());
  return 0;
}
