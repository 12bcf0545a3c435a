// A tour of graph mode (docs/graph_mode.md): compiling a function, reading
// its IR, what a recompile says, what cannot be traced, a whole training
// step compiled next to the same step run eagerly, and a data-parallel step
// on global tensors.
//
//   ./build/examples/graph_tour [--dot FILE]   (writes the training step's graph)
//   ./build/tools/tessera-run -n 2 ./build/examples/graph_tour   (2 ranks)
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <numbers>
#include <string>

#include "tessera/tessera.h"

using namespace tessera;

namespace {

std::shared_ptr<nn::Sequential> make_mlp() {
  return std::make_shared<nn::Sequential>(std::initializer_list<std::shared_ptr<nn::Module>>{
      std::make_shared<nn::Linear>(8, 16), std::make_shared<nn::ReLU>(),
      std::make_shared<nn::Linear>(16, 3)});
}

void compile_a_function() {
  std::printf("== 1. a function, compiled\n");
  auto gelu_tanh = graph::compile([](const TensorVector& in) -> TensorVector {
    const Tensor& x = in[0];
    Tensor inner = (x + x * x * x * 0.044715) * std::sqrt(2.0 / std::numbers::pi);
    return {x * 0.5 * (tanh(inner) + 1.0)};
  });
  Tensor x = randn({4, 1000});
  gelu_tanh({x});                // the first call runs eagerly
  Tensor y = gelu_tanh({x})[0];  // the second traces, optimises and runs the graph
  std::printf("%s", gelu_tanh.last_graph().str().c_str());
  std::printf("same values as eager: %s\n\n",
              allclose(y, gelu(x, "tanh"), 1e-5, 1e-6) ? "yes" : "no");
}

void recompile_on_a_new_shape() {
  std::printf(
      "== 2. a new input shape compiles again (TESSERA_GRAPH_EXPLAIN=1 says why), "
      "unless its dim is dynamic\n");
  auto double_it =
      graph::compile([](const TensorVector& in) -> TensorVector { return {in[0] * 2.0}; });
  for (int64_t batch : {4, 4, 4, 8}) double_it({ones({batch, 3})});
  std::printf("compiles: %d (batch 4, then batch 8)\n", double_it.compiles());
  // With the batch dim marked dynamic, a new batch size re-plans the traced
  // graph (shapes and memory) without tracing the function again.
  auto double_any_batch =
      graph::compile([](const TensorVector& in) -> TensorVector { return {in[0] * 2.0}; });
  for (int64_t batch : {4, 4, 4, 8, 5}) double_any_batch({graph::dynamic(ones({batch, 3}), 0)});
  std::printf("compiles: %d, re-plans: %d (batch 4 traced; 8 and 5 re-planned)\n\n",
              double_any_batch.compiles(), double_any_batch.replans());
}

void what_cannot_be_traced() {
  std::printf("== 3. reading a value inside a traced function is an error\n");
  auto branchy = graph::compile([](const TensorVector& in) -> TensorVector {
    if (in[0].sum().item<float>() > 0) return {in[0]};  // depends on the data
    return {-in[0]};
  });
  branchy({ones({2})});  // eager: fine
  try {
    branchy({ones({2})});
  } catch (const Error& error) {
    std::printf("%s\n\n", error.what());
  }
}

int compile_a_training_step(const std::string& dot_file) {
  std::printf("== 4. a training step, compiled, next to the same step run eagerly\n");
  manual_seed(0);
  auto model = make_mlp();
  optim::SGD optimizer(model->parameters(), {.lr = 0.1, .momentum = 0.9});
  manual_seed(0);
  auto twin = make_mlp();  // the same initial parameters
  optim::SGD twin_optimizer(twin->parameters(), {.lr = 0.1, .momentum = 0.9});

  auto step = graph::compile([&](const TensorVector& batch) -> TensorVector {
    optimizer.zero_grad();
    Tensor loss = cross_entropy(model->forward(batch[0]), batch[1]);
    loss.backward();
    optimizer.step();
    return {loss};
  });

  Tensor x = randn({32, 8});
  Tensor labels = randint(0, 3, {32});
  for (int i = 0; i < 5; ++i) {
    const float compiled = step({x, labels})[0].item<float>();
    twin_optimizer.zero_grad();
    Tensor loss = cross_entropy(twin->forward(x), labels);
    loss.backward();
    twin_optimizer.step();
    std::printf("step %d: loss compiled %.6f, eager %.6f\n", i + 1, compiled, loss.item<float>());
  }
  const graph::Graph& traced = step.last_graph();
  std::printf("the step's graph: %zu nodes, %zu variables (parameters and momentum buffers)\n",
              traced.nodes().size(), traced.variables().size());
  bool same = true;
  for (size_t i = 0; i < model->parameters().size(); ++i) {
    same = same && equal(model->parameters()[i], twin->parameters()[i]);
  }
  std::printf("parameters equal to eager's, bit for bit: %s\n", same ? "yes" : "no");
  if (!dot_file.empty()) {
    std::ofstream(dot_file) << traced.dot();
    std::printf("wrote %s (render with: dot -Tsvg %s)\n", dot_file.c_str(), dot_file.c_str());
  }
  return same ? 0 : 1;
}

int compile_a_global_step() {
  std::printf("== 5. a data-parallel step on global tensors, compiled\n");
  // One process, or the job tessera-run started.
  auto world = std::getenv("WORLD_SIZE") != nullptr ? distributed::init_process_group()
                                                    : distributed::default_group();
  const Placement ranks = Placement::cpu(world->size());
  manual_seed(0);
  auto model = make_mlp();
  global::parallelize(*model, ranks, {});  // parameters broadcast: data parallelism
  optim::SGD optimizer(model->parameters(), {.lr = 0.1});
  auto step = graph::compile([&](const TensorVector& batch) -> TensorVector {
    optimizer.zero_grad();
    Tensor loss = cross_entropy(model->forward(batch[0]), batch[1]);
    loss.backward();
    optimizer.step();
    return {loss};
  });
  // Each rank's 8 rows of the batch.
  Generator gen(1 + static_cast<uint64_t>(world->rank()));
  Tensor x = randn({8, 8}, DType::f32, &gen).to_global(ranks, Sbp::split(0));
  Tensor labels = randint(0, 3, {8}, DType::i64, &gen).to_global(ranks, Sbp::split(0));
  for (int i = 0; i < 3; ++i) {
    const double loss = step({x, labels})[0].item<double>();
    if (world->rank() == 0) std::printf("step %d: loss %.6f\n", i + 1, loss);
  }
  // The graph's shards and collectives (on 2 or more ranks the gradients'
  // all-reduce is there).
  std::string ir = step.last_graph().str(), line;
  for (size_t start = 0, end; start < ir.size(); start = end + 1) {
    end = ir.find('\n', start);
    line = ir.substr(start, end - start);
    const bool shown =
        line.find("shard of") != std::string::npos || line.find("all_reduce") != std::string::npos;
    if (shown && world->rank() == 0) std::printf("%s\n", line.c_str());
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::string dot_file;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::string(argv[i]) == "--dot") dot_file = argv[i + 1];
  }
  try {
    compile_a_function();
    recompile_on_a_new_shape();
    what_cannot_be_traced();
    const int status = compile_a_training_step(dot_file);
    std::printf("\n");
    return status != 0 ? status : compile_a_global_step();
  } catch (const std::exception& error) {
    std::fprintf(stderr, "graph_tour: %s\n", error.what());
    return 1;
  }
}
