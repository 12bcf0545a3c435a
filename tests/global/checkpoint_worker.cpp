// One rank of the sharded-checkpoint fault-injection test
// (sharded_checkpoint_test.cpp starts it through tessera-run and kills it at
// random points). Usage: checkpoint_worker DIR PID_DIR [STEPS]
// Writes its pid to PID_DIR/rank-<r>.pid, resumes from the checkpoint in DIR
// if there is one (step s), then for step = s + 1, s + 2, ... (STEPS times,
// or until killed) sets every tensor of a state dict to `step` and saves it
// sharded into DIR. The state mixes layouts: split on dim 0 (even and
// uneven), split on dim 1, broadcast, and a local tensor, so every rank writes
// its own shard and rank 0 also writes the shared pieces.

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "tessera/global/sharded_checkpoint.h"
#include "tessera/tessera.h"

using namespace tessera;

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: checkpoint_worker DIR PID_DIR [STEPS]\n");
    return 2;
  }
  try {
    auto world = distributed::init_process_group();
    const int rank = world->rank();
    {
      std::ofstream pid_file(std::string(argv[2]) + "/rank-" + std::to_string(rank) + ".pid");
      pid_file << ::getpid() << "\n";
    }
    const long steps = argc > 3 ? std::atol(argv[3]) : -1;
    const Placement all = Placement::cpu(world->size());
    StateDict state;
    state.insert("split_rows", zeros({64, 33}, all, Sbp::split(0)));
    state.insert("uneven", zeros({7, 5}, all, Sbp::split(0)));
    state.insert("split_columns", zeros({9, 40}, all, Sbp::split(1)));
    state.insert("broadcast", zeros({300}, all, Sbp::broadcast()));
    state.insert("local_step", zeros({3}, DType::i64));
    NoGradGuard no_grad;
    // Resume, as a training job would: from the step the folder holds.
    long first = 1;
    if (std::filesystem::exists(std::string(argv[1]) + "/index.json")) {
      global::load_sharded(argv[1], state);
      first = static_cast<long>(state.at("local_step").to_vector<int64_t>()[0]) + 1;
    }
    for (long step = first; steps < 0 || step < first + steps; ++step) {
      for (const auto& [key, value] : state) Tensor(value).fill_(static_cast<double>(step));
      global::save_sharded(argv[1], state);
      if (rank == 0) std::printf("saved step %ld\n", step);
      std::fflush(stdout);
    }
  } catch (const std::exception& error) {
    std::fprintf(stderr, "%s\n", error.what());
    return 1;
  }
  return 0;
}
