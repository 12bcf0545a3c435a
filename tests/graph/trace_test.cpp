// Tracing eager code into the graph IR, and running the IR.

#include <map>

#include "tessera/graph/trace.h"
#include "testing.h"

namespace tessera::testing {
namespace {

using graph::Graph;
using graph::ValueKind;

TEST(GraphTrace, RecordsAnMlpForwardAndRunsItLikeEager) {
  manual_seed(3);
  nn::Linear fc1(6, 5), fc2(5, 2);
  auto forward = [&](const TensorVector& in) -> TensorVector {
    return {fc2.forward(relu(fc1.forward(in[0]))) * 2.0};
  };
  Tensor example = uniform({4, 6}).to(DType::f32);
  const Graph graph = graph::trace(forward, {example});
  // The four parameters are variables; the 2.0 is an attribute, not a
  // tensor; nothing ran.
  EXPECT_EQ(graph.inputs().size(), 1u);
  EXPECT_EQ(graph.variables().size(), 4u);
  EXPECT_EQ(graph.constants().size(), 0u);
  EXPECT_GE(graph.nodes().size(), 4u);
  const std::string text = graph.str();
  EXPECT_HAS(text, "graph(%0: f32[4, 6])");
  EXPECT_HAS(text, "relu(");
  EXPECT_HAS(text, "f32[4, 2]");
  EXPECT_HAS(graph.dot(), "digraph tessera");
  // Run on other values of the same shape: the graph equals eager.
  Tensor x = uniform({4, 6}, -2, 2, 7).to(DType::f32);
  const TensorVector ran = graph::run(graph, {x});
  ASSERT_EQ(ran.size(), 1u);
  EXPECT_TRUE(all_close(ran[0], forward({x})[0]));
}

TEST(GraphTrace, InPlaceWritesToVariablesLandInTheCapturedTensor) {
  Tensor running = Tensor::from_vector<float>({1, 2, 3}, {3});
  auto update = [&](const TensorVector& in) -> TensorVector {
    running.mul_(0.5).add_(in[0]);
    return {running * 1.0};
  };
  const Graph graph = graph::trace(update, {zeros({3})});
  // Tracing did not touch the tensor.
  EXPECT_EQ(running.to_vector<float>(), (std::vector<float>{1, 2, 3}));
  Tensor x = Tensor::from_vector<float>({10, 20, 30}, {3});
  const TensorVector out = graph::run(graph, {x});
  EXPECT_EQ(running.to_vector<float>(), (std::vector<float>{10.5f, 21, 31.5f}));
  EXPECT_EQ(out[0].to_vector<float>(), running.to_vector<float>());
  graph::run(graph, {x});  // each run writes again, like eager
  EXPECT_EQ(running.to_vector<float>(), (std::vector<float>{15.25f, 30.5f, 45.75f}));
}

TEST(GraphTrace, RandomOpsDrawFreshNumbersOnEveryRun) {
  auto noisy = [](const TensorVector& in) -> TensorVector { return {in[0] + rand({8})}; };
  const Graph graph = graph::trace(noisy, {zeros({8})});
  const Tensor first = graph::run(graph, {zeros({8})})[0];
  const Tensor second = graph::run(graph, {zeros({8})})[0];
  EXPECT_FALSE(all_close(first, second));
  // The numbers are the ones eager draws from the same generator state.
  manual_seed(5);
  const Tensor ran = graph::run(graph, {zeros({8})})[0];
  manual_seed(5);
  EXPECT_TRUE(all_close(ran, noisy({zeros({8})})[0]));
}

TEST(GraphTrace, ReadingValuesIsAClearError) {
  int read_line = 0;
  auto reads = [&](const TensorVector& in) -> TensorVector {
    Tensor s = in[0].sum();
    read_line = __LINE__ + 1;
    if (s.item<float>() > 0) return {in[0]};
    return {-in[0]};
  };
  const std::string message = error_of([&] { graph::trace(reads, {ones({3})}); });
  EXPECT_HAS(message, "[graph::trace] the traced function failed after op sum");
  EXPECT_HAS(message, "cannot read tensor values");
  // The line of the function that read.
  EXPECT_HAS(message, "read at graph/trace_test.cpp:" + std::to_string(read_line));
}

TEST(GraphTrace, ReadingAGlobalValueNamesTheLine) {
  const Placement one = Placement::cpu(1);
  int read_line = 0;
  auto reads = [&](const TensorVector& in) -> TensorVector {
    Tensor s = in[0].sum();
    read_line = __LINE__ + 1;
    const std::vector<float> values = s.to_vector<float>();
    return {in[0] * static_cast<double>(values[0])};
  };
  const std::string message =
      error_of([&] { graph::trace(reads, {ones({4}).to_global(one, Sbp::split(0))}); });
  EXPECT_HAS(message, "[to_vector] a global tensor around a meta shard");
  EXPECT_HAS(message, "read at graph/trace_test.cpp:" + std::to_string(read_line));
  EXPECT_HAS(message, "cannot read tensor values");
}

TEST(GraphTrace, RunChecksItsInputs) {
  const Graph graph = graph::trace(
      [](const TensorVector& in) -> TensorVector { return {in[0] + in[0]}; }, {ones({2, 3})});
  EXPECT_HAS(error_of([&] {
               graph::run(graph, {ones({3, 2})});
             }),
             "[graph::run] input 0 is f32[3, 2] but the graph was traced for f32[2, 3]");
  EXPECT_HAS(error_of([&] { graph::run(graph, {}); }), "the graph takes 1 inputs, got 0");
  // An output the function did not compute from its inputs or variables.
  Tensor outside = Tensor::empty({2}, DType::f32, Device::meta());
  EXPECT_HAS(error_of([&] {
               graph::trace([&](const TensorVector&) -> TensorVector { return {outside}; },
                            {ones({1})});
             }),
             "output 0 was not computed by the traced function");
}

// A traced step holds what eager runs: gelu's and layer_norm's gradients
// are one kernel each (not the derivative's elementwise ops, nor the terms
// of layer_norm's mean and rstd outputs, which got no gradient).
TEST(GraphTrace, GeluAndLayerNormGradientsAreOneKernelEach) {
  manual_seed(4);
  nn::Linear linear(8, 8);
  nn::LayerNorm norm(Shape{8});
  Tensor x = randn({4, 8});
  const Graph graph = graph::trace(
      [&](const TensorVector& in) -> TensorVector {
        Tensor loss = sum(norm.forward(gelu(linear.forward(in[0]))));
        loss.backward();
        return {loss};
      },
      {x});
  std::map<std::string, int> count;
  for (const graph::Node& node : graph.nodes()) count[node.op->name] += 1;
  EXPECT_EQ(count["gelu_backward"], 1) << graph.str();
  EXPECT_EQ(count["layer_norm_backward"], 1) << graph.str();
  for (const char* op : {"erf", "exp", "div", "sub"}) EXPECT_EQ(count[op], 0) << op << graph.str();
}

}  // namespace
}  // namespace tessera::testing
