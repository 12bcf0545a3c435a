// Tessera's side of the training benchmarks (bench/train_compare.py runs it
// next to bench/train_torch.py). Same models, batches and optimizers; prints
// one JSON line with the median step time and memory figures.
//
// Usage: train_bench MODEL [--steps N] [--rounds R] [--threads T] [--compile 0|1]
//        train_bench MODEL --compile-times 1 [--rounds R]
// The second form prints the cost of compiling the step (graph::compile):
// a trace and plan at the batch size, the same with the batch dim dynamic
// (graph::dynamic: the trace and its probe traces), and the re-plan for a
// batch of three quarters the size, which traces nothing.

#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "examples/models/cnn.h"
#include "examples/models/gpt.h"
#include "examples/models/resnet.h"
#include "tessera/tessera.h"

using namespace tessera;

namespace {

int64_t rss_bytes() {
  std::ifstream status("/proc/self/status");
  std::string key;
  while (status >> key) {
    if (key == "VmRSS:") {
      int64_t kib = 0;
      status >> kib;
      return kib * 1024;
    }
    status.ignore(1 << 20, '\n');
  }
  return 0;
}

int64_t peak_rss_bytes() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<int64_t>(usage.ru_maxrss) * 1024;
}

struct Workload {
  std::shared_ptr<nn::Module> model;
  Tensor x, y;
  std::unique_ptr<optim::Optimizer> optimizer;
  std::function<Tensor(const Tensor&, const Tensor&)> loss;
};

Workload make(const std::string& name) {
  Workload w;
  if (name == "mlp") {
    w.model = models::make_mlp();
    w.x = randn({256, 784});
    w.y = randint(0, 10, {256});
  } else if (name == "small_mlp") {  // overhead-bound: 64-128-128-10, batch 32
    w.model = std::make_shared<nn::Sequential>(std::initializer_list<std::shared_ptr<nn::Module>>{
        std::make_shared<nn::Linear>(64, 128), std::make_shared<nn::ReLU>(),
        std::make_shared<nn::Linear>(128, 128), std::make_shared<nn::ReLU>(),
        std::make_shared<nn::Linear>(128, 10)});
    w.x = randn({32, 64});
    w.y = randint(0, 10, {32});
  } else if (name == "cnn") {
    w.model = models::make_cnn();
    w.x = randn({128, 1, 28, 28});
    w.y = randint(0, 10, {128});
  } else if (name == "resnet") {
    w.model = std::make_shared<models::ResNet>();
    w.x = randn({128, 3, 32, 32});
    w.y = randint(0, 10, {128});
  } else if (name == "gpt") {
    w.model = std::make_shared<models::GPT>(models::GPTConfig{});
    w.x = randint(0, 256, {16, 128});
    w.y = randint(0, 256, {16, 128});
  } else {
    std::fprintf(stderr, "unknown model '%s' (mlp, small_mlp, cnn, resnet or gpt)\n", name.c_str());
    std::exit(2);
  }
  if (name == "gpt") {
    w.optimizer = std::make_unique<optim::AdamW>(w.model->parameters(),
                                                 optim::AdamWOptions{.lr = 3e-4});
    w.loss = [](const Tensor& logits, const Tensor& y) {
      return cross_entropy(logits.reshape({-1, logits.size(-1)}), y.reshape({-1}));
    };
  } else if (name == "small_mlp") {
    w.optimizer =
        std::make_unique<optim::SGD>(w.model->parameters(), optim::SGDOptions{.lr = 0.01});
    w.loss = [](const Tensor& logits, const Tensor& y) { return cross_entropy(logits, y); };
  } else {
    w.optimizer = std::make_unique<optim::SGD>(w.model->parameters(),
                                               optim::SGDOptions{.lr = 0.01, .momentum = 0.9});
    w.loss = [](const Tensor& logits, const Tensor& y) { return cross_entropy(logits, y); };
  }
  return w;
}

// One training step of `w`: forward, loss, backward, update.
graph::TracedFn training_step(Workload& w) {
  return [&w](const TensorVector& in) -> TensorVector {
    w.optimizer->zero_grad();
    Tensor loss = w.loss(w.model->forward(in[0]), in[1]);
    loss.backward();
    w.optimizer->step();
    return {loss};
  };
}

double median_of(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

// Compile, dynamic compile and re-plan seconds, medians of `rounds` fresh
// compiled functions.
int compile_times(const std::string& name, int rounds) {
  manual_seed(0);
  Workload w = make(name);
  const graph::TracedFn eager_step = training_step(w);
  const int64_t rows = w.x.size(0), fewer = std::max<int64_t>(1, rows * 3 / 4);
  const Tensor x2 = w.x.narrow(0, 0, fewer).contiguous(), y2 = w.y.narrow(0, 0, fewer).contiguous();
  std::vector<double> compile, dynamic_compile, replan;
  size_t nodes = 0;
  for (int r = 0; r < rounds; ++r) {
    auto fixed = graph::compile(eager_step);
    fixed({w.x, w.y});  // eager
    fixed({w.x, w.y});  // traces and plans
    compile.push_back(fixed.compile_seconds());
    nodes = fixed.last_graph().nodes().size();
    // A mark stays on its tensor, so mark copies: `fixed` of the next
    // round must see unmarked inputs.
    auto with_dynamic_batch = graph::compile(eager_step);
    auto marked = [](const Tensor& x, const Tensor& y) {
      return TensorVector{graph::dynamic(x.clone(), 0), graph::dynamic(y.clone(), 0)};
    };
    with_dynamic_batch(marked(w.x, w.y));
    with_dynamic_batch(marked(w.x, w.y));
    with_dynamic_batch(marked(x2, y2));  // re-plans
    if (with_dynamic_batch.compiles() != 1 || with_dynamic_batch.replans() != 1 ||
        fixed.compiles() != 1 || !graph::dynamic_dims(w.x).empty()) {
      std::fprintf(stderr, "train_bench: the batch dim of %s did not re-plan\n", name.c_str());
      return 1;
    }
    dynamic_compile.push_back(with_dynamic_batch.compile_seconds());
    replan.push_back(with_dynamic_batch.replan_seconds());
  }
  std::printf(
      "{\"framework\": \"tessera\", \"model\": \"%s\", \"batch\": %lld, \"replan_batch\": %lld, "
      "\"nodes\": %zu, \"compile_seconds\": %.6f, \"dynamic_compile_seconds\": %.6f, "
      "\"replan_seconds\": %.6f, \"threads\": %d}\n",
      name.c_str(), static_cast<long long>(rows), static_cast<long long>(fewer), nodes,
      median_of(compile), median_of(dynamic_compile), median_of(replan), num_threads());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr,
                 "usage: %s mlp|small_mlp|cnn|resnet|gpt [--steps N] [--rounds R] [--threads T] "
                 "[--compile 0|1]\n",
                 argv[0]);
    return 2;
  }
  const std::string name = argv[1];
  int steps = 10, rounds = 5;
  bool compiled = false, times_of_compiles = false;
  for (int i = 2; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    const int value = std::atoi(argv[i + 1]);
    if (flag == "--steps") steps = value;
    else if (flag == "--rounds") rounds = value;
    else if (flag == "--threads" && value > 0) set_num_threads(value);
    else if (flag == "--compile")
      compiled = value != 0;
    else if (flag == "--compile-times")
      times_of_compiles = value != 0;
  }
  if (times_of_compiles) return compile_times(name, rounds);
  manual_seed(0);
  const int64_t rss_before = rss_bytes();
  Workload w = make(name);
  // The whole step, eager; with --compile 1, traced into one graph
  // (graph::compile: the first call runs eagerly, the second traces).
  const graph::TracedFn eager_step = training_step(w);
  auto compiled_step = graph::compile(eager_step);
  auto step = [&] {
    if (compiled) {
      compiled_step({w.x, w.y});
    } else {
      eager_step({w.x, w.y});
    }
  };
  for (int i = 0; i < 3; ++i) step();
  CpuAllocator::instance().reset_peak();
  std::vector<double> times;
  for (int r = 0; r < rounds; ++r) {
    auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < steps; ++i) step();
    times.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() /
                    steps);
  }
  std::sort(times.begin(), times.end());
  // Read before state_dict() below, whose copies of the optimizer's
  // buffers would be the peak otherwise.
  const int64_t allocator_peak = CpuAllocator::instance().stats().peak_bytes;
  const int64_t peak = peak_rss_bytes();
  // The most bytes the steps held at once, less the model's state (the
  // parameters and the optimizer's buffers, the same in every mode): the
  // gradients, activations and temporaries. A compiled step's arena and
  // gradient buffers are in it, held since it compiled.
  int64_t state_bytes = 0;
  for (const Tensor& p : w.model->parameters())
    state_bytes += p.numel() * static_cast<int64_t>(dtype_size(p.dtype()));
  for (const auto& [key, value] : w.optimizer->state_dict()) {
    if (key.rfind("state.", 0) == 0)
      state_bytes += value.numel() * static_cast<int64_t>(dtype_size(value.dtype()));
  }
  const int64_t step_peak = allocator_peak - state_bytes;
  // The gradients the step leaves on the parameters: the same bytes in
  // every mode, part of step_peak_bytes.
  int64_t grad_bytes = 0;
  for (const Tensor& p : w.model->parameters()) {
    if (p.grad().defined())
      grad_bytes += p.grad().numel() * static_cast<int64_t>(dtype_size(p.grad().dtype()));
  }
  std::printf(
      "{\"framework\": \"tessera\", \"model\": \"%s\", \"batch\": %lld, \"step_seconds\": %.9f, "
      "\"peak_rss\": %lld, \"peak_rss_growth\": %lld, \"step_peak_bytes\": %lld, "
      "\"grad_bytes\": %lld, \"threads\": %d, \"compiled\": %s}\n",
      name.c_str(), static_cast<long long>(w.x.size(0)), times[times.size() / 2],
      static_cast<long long>(peak), static_cast<long long>(peak - rss_before),
      static_cast<long long>(step_peak), static_cast<long long>(grad_bytes), num_threads(),
      compiled ? "true" : "false");
  return 0;
}
