// The planner: its search against trying every assignment, its choices on
// steps whose best layout is clear from first principles, memory budgets,
// pins, and what it tells the user.

#include <gtest/gtest.h>

#include <cstdio>
#include <random>

#include "examples/models/gpt.h"
#include "tessera/graph/compile.h"
#include "tessera/graph/trace.h"
#include "tessera/optim/adam.h"
#include "tessera/optim/sgd.h"
#include "tessera/planner/auto_parallel.h"
#include "tessera/planner/described_models.h"
#include "tessera/planner/ilp.h"
#include "tessera/planner/planner.h"
#include "testing.h"

// The statement raises an Error whose message holds `piece`.
#define EXPECT_THROW_MSG(statement, piece) \
  EXPECT_HAS(::tessera::testing::error_of([&] { (void)(statement); }), piece)

namespace tessera::planner {
namespace {

// A random cost graph: `nodes` nodes of 2-4 strategies, each pair joined
// with probability `density`, costs in [0, 1), a few infeasible.
CostGraph random_graph(std::mt19937_64& random, int nodes, double density) {
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  CostGraph graph;
  for (int v = 0; v < nodes; ++v) {
    const size_t count = 2 + random() % 3;
    std::vector<double> cost(count), memory(count);
    for (size_t s = 0; s < count; ++s) {
      cost[s] = unit(random);
      memory[s] = unit(random);
    }
    std::string name = "n";  // (GCC 12 warns, wrongly, about "n" + std::to_string(v))
    name += std::to_string(v);
    graph.add_node(name, cost, memory);
  }
  for (int a = 0; a < nodes; ++a) {
    for (int b = a + 1; b < nodes; ++b) {
      if (unit(random) >= density) continue;
      // Either direction; twice now and then, so parallel edges add up.
      const int repeats = unit(random) < 0.2 ? 2 : 1;
      for (int r = 0; r < repeats; ++r) {
        const bool forward = unit(random) < 0.5;
        const int from = forward ? a : b;
        const int to = forward ? b : a;
        std::vector<double> cost(graph.strategies(from) * graph.strategies(to));
        for (double& c : cost) c = unit(random) < 0.05 ? kInfeasible : unit(random);
        graph.add_edge(from, to, cost);
      }
    }
  }
  return graph;
}

TEST(PlannerSearch, FindsTheExhaustiveOptimumOnSmallGraphs) {
  std::mt19937_64 random(7);
  int with_branching = 0;
  for (int trial = 0; trial < 300; ++trial) {
    const int nodes = 2 + trial % 11;  // 2..12
    const double density = trial % 3 == 0 ? 0.2 : (trial % 3 == 1 ? 0.5 : 0.9);
    const double weight = trial % 4 == 0 ? 0.3 : 0.0;
    CostGraph graph = random_graph(random, nodes, density);
    SearchOptions options;
    options.memory_weight = weight;
    const Solution got = solve(graph, options);
    const Solution want = solve_exhaustively(graph, weight);
    ASSERT_TRUE(got.exact) << "trial " << trial;
    ASSERT_NEAR(got.cost, want.cost, 1e-9 * std::max(1.0, want.cost))
        << "trial " << trial << ": " << nodes << " nodes, density " << density;
    ASSERT_DOUBLE_EQ(graph.cost(got.choice, weight), got.cost);
    if (got.remaining > 0) ++with_branching;
  }
  // The dense graphs leave nodes that elimination cannot remove, so branch
  // and bound is exercised, not only elimination.
  EXPECT_GT(with_branching, 50);
}

TEST(PlannerSearch, StoppedEarlyItSaysSoAndKeepsAFeasibleAnswer) {
  std::mt19937_64 random(11);
  CostGraph graph = random_graph(random, 12, 0.9);
  SearchOptions options;
  options.exact_limit = 1;
  options.ilp_seconds = 0;
  const Solution got = solve(graph, options);
  const Solution want = solve_exhaustively(graph);
  EXPECT_GT(got.remaining, 0);
  EXPECT_FALSE(got.exact);
  EXPECT_GE(got.cost, want.cost - 1e-12);
  EXPECT_LE(got.lower_bound, want.cost + 1e-12);
}

// A model of identical layers, each a few nodes joined to one another and
// each to its counterpart in the next layer: the second strategy costs
// more per node but less per edge, and a node that disagrees with a
// neighbour pays a large mismatch. Every node on the second strategy is optimal; from every node
// on the first, changing a few nodes (a layer included: its neighbours in
// the next layer disagree) only adds mismatches. Tying the repeated nodes
// (the middle layers become one node) finds it.
TEST(PlannerSearch, TyingRepeatedLayersChangesEveryLayerAtOnce) {
  constexpr int kLayers = 12, kWidth = 3;
  const std::vector<double> edge = {1, 100, 100, 0};  // (0, 0), (0, 1), (1, 0), (1, 1)
  CostGraph graph;
  for (int v = 0; v < kLayers * kWidth; ++v) graph.add_node(std::string("n"), {0.0, 1.5});
  int edges = 0;
  for (int layer = 0; layer < kLayers; ++layer) {
    for (int a = 0; a < kWidth; ++a) {
      for (int b = a + 1; b < kWidth; ++b, ++edges) {
        graph.add_edge(layer * kWidth + a, layer * kWidth + b, edge);
      }
      if (layer + 1 < kLayers) {
        graph.add_edge(layer * kWidth + a, (layer + 1) * kWidth + a, edge);
        ++edges;
      }
    }
  }
  const std::vector<int> best(kLayers * kWidth, 1);
  EXPECT_DOUBLE_EQ(graph.cost(best), 1.5 * kLayers * kWidth);
  EXPECT_LT(graph.cost(best), edges);
  EXPECT_DOUBLE_EQ(graph.cost(std::vector<int>(kLayers * kWidth, 0)), edges);
  SearchOptions options;
  options.exact_limit = 1;
  options.ilp_seconds = 0;
  options.starts = {std::vector<int>(kLayers * kWidth, 0)};
  options.tie_repeats = false;
  const Solution untied = solve(graph, options);
  EXPECT_FALSE(untied.exact);
  EXPECT_GT(untied.cost, graph.cost(best) + 1e-9)
      << "the untied search reached the optimum: the case tests nothing";
  options.tie_repeats = true;
  const Solution tied = solve(graph, options);
  EXPECT_DOUBLE_EQ(tied.cost, graph.cost(best));
  EXPECT_EQ(tied.choice, best);
}

TEST(PlannerSearch, TheIntegerProgramFindsTheExhaustiveOptimum) {
  std::mt19937_64 random(5);
  for (int trial = 0; trial < 60; ++trial) {
    const int nodes = 2 + trial % 9;  // 2..10
    const double density = trial % 2 == 0 ? 0.4 : 0.9;
    IlpOptions options;
    options.memory_weight = trial % 3 == 0 ? 0.3 : 0.0;
    CostGraph graph = random_graph(random, nodes, density);
    const Solution want = solve_exhaustively(graph, options.memory_weight);
    const IlpSolution got = solve_ilp(graph, options);
    ASSERT_TRUE(got.optimal) << "trial " << trial;
    ASSERT_NEAR(got.cost, want.cost, 1e-9 * std::max(1.0, want.cost)) << "trial " << trial;
    ASSERT_DOUBLE_EQ(graph.cost(got.choice, options.memory_weight), got.cost);
    ASSERT_NEAR(got.lower_bound, want.cost, 1e-9 * std::max(1.0, want.cost));
  }
}

TEST(PlannerSearch, WhenBranchAndBoundStopsTheIntegerProgramFinishes) {
  std::mt19937_64 random(11);
  for (int trial = 0; trial < 3; ++trial) {
    CostGraph graph = random_graph(random, 12, 0.9);
    SearchOptions options;
    options.exact_limit = 1;
    const Solution got = solve(graph, options);
    const Solution want = solve_exhaustively(graph);
    EXPECT_GT(got.remaining, 0);
    EXPECT_TRUE(got.exact) << "trial " << trial;
    EXPECT_NEAR(got.cost, want.cost, 1e-9 * std::max(1.0, want.cost)) << "trial " << trial;
    EXPECT_DOUBLE_EQ(got.lower_bound, got.cost);
  }
}

TEST(PlannerSearch, TheIntegerProgramKeepsItsStartAndRejectsBadOnes) {
  std::mt19937_64 random(13);
  CostGraph graph = random_graph(random, 8, 0.9);
  const Solution want = solve_exhaustively(graph);
  IlpOptions options;
  options.start = want.choice;
  const IlpSolution got = solve_ilp(graph, options);
  EXPECT_NEAR(got.cost, want.cost, 1e-9 * std::max(1.0, want.cost));
  options.start.pop_back();
  EXPECT_THROW_MSG(solve_ilp(graph, options), "needs a strategy per node: 8 nodes, 7");
  options.start = want.choice;
  options.start[2] = 9;
  EXPECT_THROW_MSG(solve_ilp(graph, options), "gives node 2 strategy 9");
  options.seconds = 0;
  EXPECT_THROW_MSG(solve_ilp(graph, options), "time limit must be positive seconds, got 0");
}

TEST(PlannerSearch, AProgramWithNoFeasibleAssignmentClaimsNoBound) {
  // Every strategy of b is ruled out: the program has no solution, and
  // neither it nor the search may claim a bound above what they return.
  CostGraph graph;
  const int a = graph.add_node("a", {1, 2, 3});
  const int b = graph.add_node("b", {kInfeasible, kInfeasible});
  const int c = graph.add_node("c", {1, 2});
  graph.add_edge(a, b, {0, 1, 1, 0, 2, 2});
  graph.add_edge(b, c, {0, 1, 1, 0});
  graph.add_edge(a, c, {0, 1, 1, 0, 3, 3});
  const IlpSolution program = solve_ilp(graph);
  EXPECT_TRUE(program.choice.empty());
  EXPECT_EQ(program.lower_bound, 0.0);
  SearchOptions options;
  options.exact_limit = 1;
  const Solution found = solve(graph, options);
  EXPECT_LE(found.lower_bound, found.cost);
}

TEST(PlannerSearch, RejectsMalformedGraphs) {
  CostGraph graph;
  EXPECT_THROW_MSG(graph.add_node("empty", {}), "at least one strategy");
  const int a = graph.add_node("a", {1, 2});
  const int b = graph.add_node("b", {1, 2, 3});
  EXPECT_THROW_MSG(graph.add_edge(a, b, {0, 0}), "needs 2 x 3 costs, got 2");
  EXPECT_THROW_MSG(graph.add_edge(a, a, {0, 0, 0, 0}), "two different nodes");
  EXPECT_THROW_MSG(graph.add_node("c", {1, 2}, {1}), "2 strategies but 1 memory");
  EXPECT_THROW_MSG(graph.add_node("d", {1, 2}, {}, {{0, 0}}), "2 strategies but parts for 1");
  EXPECT_THROW_MSG(graph.add_node("e", {1, 2}, {}, {{0, 0}, {1}}),
                   "different numbers of mesh axes");
}

// y = relu(x @ w1) @ w2, loss = sum(y) (or with `target`, the mean
// squared error of y against input 1), and with `backward` its gradients.
struct Mlp {
  Tensor w1;
  Tensor w2;
  nn::Module::NamedTensors names;
  Mlp(int64_t in, int64_t hidden, int64_t out) {
    manual_seed(3);
    w1 = randn({in, hidden}).requires_grad_();
    w2 = randn({hidden, out}).requires_grad_();
    names = {{"w1", w1}, {"w2", w2}};
  }
  graph::Graph trace(int64_t batch, int64_t in, bool backward, bool target = false) {
    w1.set_grad(Tensor());
    w2.set_grad(Tensor());
    MetaVector inputs{TensorMeta{{batch, in}, DType::f32, Device{}}};
    if (target) inputs.push_back(TensorMeta{{batch, w2.size(1)}, DType::f32, Device{}});
    return graph::trace(
        [&, backward, target](const TensorVector& x) -> TensorVector {
          Tensor y = x[0].matmul(w1).relu().matmul(w2);
          Tensor loss = target ? sub(y, x[1]).square().mean() : y.sum();
          if (backward) loss.backward();
          return {loss};
        },
        inputs);
  }
};

TEST(PlannerSearch, TracedStepsMatchTheExhaustiveOptimum) {
  // Steps of at most 12 ops on 2 and 4 ranks, 1-D and 2-D: two layers
  // forward, one layer forward, and one layer with its backward.
  int compared = 0;
  for (const Placement& mesh :
       {Placement::cpu(2), Placement::cpu(4), Placement::cpu_mesh({2, 2})}) {
    for (int kind = 0; kind < 3; ++kind) {
      Mlp mlp(16, 32, 1);
      manual_seed(4);
      Tensor w = randn({16, 8}).requires_grad_();
      auto one_layer = [&, kind](const TensorVector& x) -> TensorVector {
        Tensor loss = x[0].matmul(w).relu().sum();
        if (kind == 2) loss.backward();
        return {loss};
      };
      const graph::Graph step =
          kind == 0
              ? mlp.trace(64, 16, false)
              : graph::trace(one_layer, MetaVector{TensorMeta{{64, 16}, DType::f32, Device{}}});
      const nn::Module::NamedTensors names =
          kind == 0 ? mlp.names : nn::Module::NamedTensors{{"w", w}};
      PlanOptions options;
      options.mesh = mesh;
      const CostGraph graph = cost_graph_of(step, options, names);
      double count = 1;
      for (const ChoiceNode& node : graph.nodes()) count *= static_cast<double>(node.cost.size());
      EXPECT_LE(step.nodes().size(), 12u);
      if (count > 5e7) continue;  // too many assignments to try every one
      const Solution got = solve(graph);
      const Solution want = solve_exhaustively(graph);
      EXPECT_NEAR(got.cost, want.cost, 1e-12 * want.cost)
          << placement_str(mesh) << " kind " << kind;
      const Plan plan = planner::plan(step, options, names);
      EXPECT_NEAR(plan.objective, want.cost, 1e-12 * want.cost);
      ++compared;
    }
  }
  // All but the 2-D steps of two layers, and of one layer with backward.
  EXPECT_GE(compared, 7);
}

TEST(Planner, ManyRowsAndSmallWeightsGiveDataParallel) {
  // All-reducing 32 KiB of gradients costs less than moving any activation
  // of 4096 rows, which splitting a weight must do before the loss (the
  // error needs whole outputs). (With a sum for the loss, splitting the
  // first weight's columns moves nothing at all, and the planner rightly
  // prefers it.)
  Mlp mlp(64, 64, 64);
  const graph::Graph step = mlp.trace(4096, 64, true, true);
  PlanOptions options;
  options.mesh = Placement::cpu(2);
  const Plan plan = planner::plan(step, options, mlp.names);
  EXPECT_EQ(plan.sbp_of("input 0"), NdSbp(Sbp::split(0))) << plan.explain();
  EXPECT_TRUE(plan.sbp_of("w1").all_broadcast()) << plan.explain();
  EXPECT_TRUE(plan.sbp_of("w2").all_broadcast()) << plan.explain();
  EXPECT_TRUE(plan.exact);
}

TEST(Planner, FewRowsAndLargeWeightsSplitTheWeights) {
  // Data parallel would all-reduce 32 MiB of gradients; splitting the
  // weights moves activations of 8 rows.
  Mlp mlp(1024, 4096, 1024);
  const graph::Graph step = mlp.trace(8, 1024, true);
  PlanOptions options;
  options.mesh = Placement::cpu(2);
  const Plan plan = planner::plan(step, options, mlp.names);
  EXPECT_FALSE(plan.sbp_of("w1").all_broadcast()) << plan.explain();
  EXPECT_FALSE(plan.sbp_of("w2").all_broadcast()) << plan.explain();

  // Data parallel, pinned, is predicted slower, and its state is whole.
  PlanOptions data_parallel = options;
  data_parallel.pinned = {
      {"input 0", Sbp::split(0)}, {"w1", Sbp::broadcast()}, {"w2", Sbp::broadcast()}};
  const Plan pinned = planner::plan(step, data_parallel, mlp.names);
  EXPECT_EQ(pinned.sbp_of("w1"), NdSbp(Sbp::broadcast()));
  EXPECT_GT(pinned.prediction.step_seconds, plan.prediction.step_seconds);
  const double parameter_bytes = (1024.0 * 4096 + 4096.0 * 1024) * 4;
  EXPECT_DOUBLE_EQ(pinned.prediction.state_bytes, parameter_bytes * (2 + 2));
  EXPECT_LT(plan.prediction.state_bytes, pinned.prediction.state_bytes);
}

TEST(Planner, AMemoryBudgetDataParallelCannotMeetIsMet) {
  Mlp mlp(512, 512, 512);
  const graph::Graph step = mlp.trace(256, 512, true);
  PlanOptions options;
  options.mesh = Placement::cpu(2);
  options.pinned = {{"input 0", Sbp::split(0)}, {"w1", Sbp::broadcast()}, {"w2", Sbp::broadcast()}};
  const Plan data_parallel = planner::plan(step, options, mlp.names);
  options.pinned.clear();
  const Plan free = planner::plan(step, options, mlp.names);
  options.memory_budget = 0.7 * data_parallel.prediction.peak_bytes;
  const Plan fitted = planner::plan(step, options, mlp.names);
  EXPECT_LE(fitted.prediction.peak_bytes, options.memory_budget) << fitted.explain();
  EXPECT_GE(fitted.prediction.step_seconds, free.prediction.step_seconds * (1 - 1e-12));
  EXPECT_HAS(fitted.explain(), "(budget ");

  options.memory_budget = 1024;
  EXPECT_THROW_MSG(planner::plan(step, options, mlp.names), "no plan fits 0.00 MiB per rank");
  const std::string message = testing::error_of([&] { planner::plan(step, options, mlp.names); });
  EXPECT_HAS(message, "Give a budget of at least");
  EXPECT_HAS(message, "(largest: w");
}

TEST(Planner, ExplainsDrawsSavesAndReplansWithPins) {
  Mlp mlp(64, 64, 8);
  const graph::Graph step = mlp.trace(512, 64, true);
  PlanOptions options;
  options.mesh = Placement::cpu_mesh({2, 2});
  const Plan plan = planner::plan(step, options, mlp.names);
  const std::string text = plan.explain();
  for (const char* part : {"Plan for cpu", "Predicted step per rank", "exposed communication",
                           "Predicted peak memory per rank", "  w1 f32[64, 64]", "  input 0 ",
                           "matmul", "runner-up"}) {
    EXPECT_HAS(text, part);
  }
  EXPECT_EQ(plan.ops.size(), step.nodes().size());
  EXPECT_HAS(plan.dot(), "digraph plan");

  // Saved, edited and planned again: the pins hold, the rest is planned.
  std::map<std::string, NdSbp> pins = pins_from_json(plan.to_json(), 2);
  EXPECT_EQ(pins.size(), 3u);
  EXPECT_EQ(pins.at("w1"), plan.sbp_of("w1"));
  options.pinned = {{"w1", NdSbp({Sbp::split(1), Sbp::broadcast()})}};
  const Plan edited = planner::plan(step, options, mlp.names);
  EXPECT_EQ(edited.sbp_of("w1"), NdSbp({Sbp::split(1), Sbp::broadcast()}));
  EXPECT_GE(edited.objective, plan.objective * (1 - 1e-12));

  EXPECT_THROW_MSG(pins_from_json("{", 2), "JSON object");
  EXPECT_THROW_MSG(pins_from_json(R"({"tensors": {"w1": ["B"]}})", 2), "list of 2 layouts");
  EXPECT_THROW_MSG(pins_from_json(R"j({"tensors": {"w1": ["S(x)", "B"]}})j", 2),
                   "'S(x)' is not a layout");
  EXPECT_THROW_MSG(plan.sbp_of("w3"), "no tensor named 'w3'");
  options.pinned = {{"w3", Sbp::broadcast()}};
  EXPECT_THROW_MSG(planner::plan(step, options, mlp.names),
                   "pinned tensor 'w3' is not in the step");
  options.pinned = {{"w1", NdSbp({Sbp::split(2), Sbp::broadcast()})}};
  EXPECT_THROW_MSG(planner::plan(step, options, mlp.names), "pinned w1");
  EXPECT_THROW_MSG(planner::plan(step, PlanOptions{}, mlp.names), "mesh is not set");
}

TEST(Planner, AutoParallelizeLaysOutTheModulesParameters) {
  // One process: the layouts are set on a one-rank mesh (the multi-rank
  // training runs in tests/global, global_worker's "auto" mode).
  manual_seed(5);
  auto model = std::make_shared<nn::Sequential>(std::initializer_list<std::shared_ptr<nn::Module>>{
      std::make_shared<nn::Linear>(16, 32), std::make_shared<nn::ReLU>(),
      std::make_shared<nn::Linear>(32, 4)});
  const Tensor x = randn({64, 16});
  const Tensor y = randint(0, 4, {64}, DType::i64);
  auto loss_of = [&](const TensorVector& batch) {
    return cross_entropy(model->forward(batch[0]), batch[1]);
  };
  const Plan plan = auto_parallelize(*model, Placement::cpu(1), loss_of, {x, y});
  for (const auto& [name, param] : model->named_parameters()) {
    EXPECT_TRUE(param.is_global()) << name;
    EXPECT_EQ(param.nd_sbp(), plan.sbp_of(name)) << name;
  }
  EXPECT_THROW_MSG(auto_parallelize(*model, Placement::cpu(1), loss_of, {x, y}),
                   "is already global");
}

// What the allocator holds at the peak of an eager AdamW training step of
// `model` (the third: the optimizer's state is made by then), beyond what
// it held before the model was made, against the planner's prediction for
// that step on one rank.
void expect_peak_memory_predicted(
    const std::function<std::shared_ptr<nn::Module>()>& make,
    const std::function<Tensor(nn::Module&, const TensorVector&)>& loss,
    const std::function<TensorVector()>& make_batch, double tolerance) {
  CpuAllocator& allocator = CpuAllocator::instance();
  const double before = static_cast<double>(allocator.stats().current_bytes);
  double measured = 0;
  double predicted = 0;
  std::string explained;
  {
    std::shared_ptr<nn::Module> model = make();
    const TensorVector batch = make_batch();
    auto loss_of = [&](const TensorVector& b) { return loss(*model, b); };
    PlanOptions options;
    options.mesh = Placement::cpu(1);
    const Plan plan =
        planner::plan(trace_step(*model, loss_of, batch), options, model->named_parameters());
    predicted = plan.prediction.peak_bytes;
    explained = plan.explain();
    optim::AdamW optimizer(model->parameters(), {.lr = 1e-3});
    for (int step = 0; step < 3; ++step) {
      if (step == 2) allocator.reset_peak();
      optimizer.zero_grad();
      loss_of(batch).backward();
      optimizer.step();
    }
    measured = static_cast<double>(allocator.stats().peak_bytes) - before;
  }
  EXPECT_NEAR(predicted, measured, tolerance * measured)
      << "predicted " << predicted / (1 << 20) << " MiB, measured " << measured / (1 << 20)
      << " MiB\n"
      << explained;
}

TEST(Planner, PredictsTheMemoryAnEagerStepPeaksAt) {
  // An MLP: its 784x1024 weight's shards are 3.06 MiB, which the CPU
  // allocator rounds to 4 MiB (four times: weight, gradient, two moments);
  // the gradients exist only from the backward pass on.
  expect_peak_memory_predicted(
      [] {
        return std::make_shared<nn::Sequential>(std::initializer_list<std::shared_ptr<nn::Module>>{
            std::make_shared<nn::Linear>(784, 1024), std::make_shared<nn::ReLU>(),
            std::make_shared<nn::Linear>(1024, 10)});
      },
      [](nn::Module& m, const TensorVector& b) {
        return cross_entropy(static_cast<nn::Sequential&>(m).forward(b[0]), b[1]);
      },
      [] {
        return TensorVector{randn({128, 784}), randint(0, 10, {128}, DType::i64)};
      },
      0.04);
  // A GPT: attention's q, k and v are views of one projection, kept for
  // the backward pass, which keeps all of it; softmax's tape keeps its
  // input as well as the output its gradient reads.
  models::GPTConfig config;
  config.context = 32;
  config.d_model = 64;
  config.layers = 2;
  expect_peak_memory_predicted([config] { return std::make_shared<models::GPT>(config); },
                               [](nn::Module& m, const TensorVector& b) {
                                 return cross_entropy(
                                     static_cast<models::GPT&>(m).forward(b[0]).flatten(0, 1),
                                     b[1].flatten());
                               },
                               [] {
                                 const Tensor tokens = randint(0, 256, {8, 33}, DType::i64);
                                 return TensorVector{tokens.narrow(1, 0, 32).contiguous(),
                                                     tokens.narrow(1, 1, 32).contiguous()};
                               },
                               0.05);
}

TEST(Planner, CompileWithAutoParallelPlansLaysOutAndTrains) {
  // One process, a one-rank mesh: the step is planned on its first call
  // with the optimizer's update left out, the parameters laid out, and
  // training goes on as eager training of the same model does (the
  // multi-rank runs are global_worker's "auto" mode).
  auto make = [] {
    manual_seed(5);
    return std::make_shared<nn::Sequential>(std::initializer_list<std::shared_ptr<nn::Module>>{
        std::make_shared<nn::Linear>(16, 32), std::make_shared<nn::ReLU>(),
        std::make_shared<nn::Linear>(32, 4)});
  };
  const Tensor x = randn({64, 16});
  const Tensor y = randint(0, 4, {64}, DType::i64);
  auto train = [&](bool adam, bool auto_parallel, std::vector<double>& losses) {
    auto model = make();
    std::unique_ptr<optim::Optimizer> optimizer;
    if (adam) {
      optimizer = std::make_unique<optim::Adam>(model->parameters(), optim::AdamOptions{});
    } else {
      optimizer = std::make_unique<optim::SGD>(model->parameters(),
                                               optim::SGDOptions{.lr = 0.1, .momentum = 0.9});
    }
    auto step_fn = [&](const TensorVector& batch) -> TensorVector {
      optimizer->zero_grad();
      Tensor loss = cross_entropy(model->forward(batch[0]), batch[1]);
      loss.backward();
      optimizer->step();
      return {loss};
    };
    graph::CompileOptions options;
    if (auto_parallel) {
      options = {
          .mesh = Placement::cpu(1), .auto_parallel = true, .names = model->named_parameters()};
    }
    graph::CompiledFunction step = graph::compile(step_fn, options);
    for (int s = 0; s < 4; ++s) losses.push_back(step({x, y})[0].item<double>());
    if (!auto_parallel) return Plan{};
    EXPECT_EQ(step.compiles(), 1);
    for (const auto& [name, param] : model->named_parameters()) {
      EXPECT_TRUE(param.is_global()) << name;
    }
    return plan_of(step);
  };
  for (const bool adam : {false, true}) {
    std::vector<double> local, parallel;
    train(adam, false, local);
    const Plan plan = train(adam, true, parallel);
    for (size_t s = 0; s < local.size(); ++s) {
      EXPECT_NEAR(parallel[s], local[s], 1e-5 * std::abs(local[s])) << "step " << s;
    }
    // Parameter, gradient and the optimizer's state as it reported it:
    // SGD with momentum 1 buffer, Adam 2; each as the CPU allocator
    // reserves it (64-byte multiples: the 4-float bias takes 64 bytes).
    const double bytes = 16 * 32 * 4 + 32 * 4 + 32 * 4 * 4 + 64;
    EXPECT_DOUBLE_EQ(plan.prediction.state_bytes, bytes * (adam ? 4 : 3));
    EXPECT_HAS(plan.explain(), "0.weight");
  }
  EXPECT_THROW_MSG(
      graph::compile([](const TensorVector& in) { return in; }, {.mesh = Placement::cpu(1)}),
      "set .auto_parallel = true");
  EXPECT_THROW_MSG(
      graph::compile([](const TensorVector& in) { return in; }, {.auto_parallel = true}),
      "auto_parallel needs a mesh of 1 or 2 axes");
  EXPECT_THROW_MSG(
      graph::compile([](const TensorVector& in) { return in; },
                     {.mesh = Placement::cpu(1), .auto_parallel = true, .memory_budget = -1}),
      "memory_budget is bytes per rank");
  graph::CompiledFunction uncalled = graph::compile([](const TensorVector& in) { return in; });
  EXPECT_THROW_MSG(plan_of(uncalled), "has no plan");
  // A model already laid out is refused by name.
  auto model = make();
  model->to_global(Placement::cpu(1));
  graph::CompiledFunction global_step = graph::compile(
      [&](const TensorVector& batch) -> TensorVector { return {model->forward(batch[0])}; },
      {.mesh = Placement::cpu(1), .auto_parallel = true});
  EXPECT_THROW_MSG(global_step({x}), "must still be local");
}

TEST(Planner, FusedKernelsKeepElementwiseResultsOnChip) {
  // softmax(x * 2 + 1) on one rank, priced by bytes alone (1 GB/s, 1 us a
  // call). Fused, the product and the sum stay on chip: 4 tensors of
  // [64, 1024] f32 fewer through memory (the product written and read, the
  // sum written and read), and two launches fewer.
  global::CostModel model;
  model.set_compute({.flops_per_second = 1e18, .bytes_per_second = 1e9, .seconds_per_call = 1e-6});
  const Tensor x = randn({64, 1024});
  auto predict = [&](bool fused, bool product_returned) {
    const graph::Graph step = graph::trace(
        [&](const TensorVector& in) -> TensorVector {
          Tensor product = in[0] * 2.0;
          Tensor out = softmax(product + 1.0, -1);
          if (product_returned) return {out, product};
          return {out};
        },
        {x});
    PlanOptions options;
    options.mesh = Placement::cpu(1);
    options.model = model;
    options.fuse_elementwise = fused;
    return planner::plan(step, options).prediction.compute_seconds;
  };
  const double tensor = 64 * 1024 * 4 / 1e9;
  EXPECT_NEAR(predict(false, false) - predict(true, false), 4 * tensor + 2e-6, 1e-12);
  // A result read again (here returned) goes through memory: only the sum
  // stays on chip.
  EXPECT_NEAR(predict(false, true) - predict(true, true), 2 * tensor + 1e-6, 1e-12);
}

TEST(PlannerCostModel, ProfilesRoundTripAndRejectBadFields) {
  global::CostModel model;
  model.name = "test";
  model.sources = "made up";
  model.memory_bytes = 1e9;
  model.peak_flops_per_second = 2e12;
  model.overlaps_communication = false;
  model.set_ranks_per_node(4);
  model.set_compute({1e11, 1e10, 2e-6});
  model.set_compute(OpKind::matmul, {5e11, 1e10, 3e-6});
  model.set_link(2, {1e-5, 1e-10});
  model.set_inter_node_link(2, {3e-5, 1e-9});
  const global::CostModel back = global::CostModel::from_json(model.to_json());
  EXPECT_EQ(back.to_json(), model.to_json());
  EXPECT_EQ(back.compute(OpKind::matmul).flops_per_second, 5e11);
  EXPECT_EQ(back.compute(OpKind::elementwise).flops_per_second, 1e11);
  // A group of 2 within a node of 4 uses the node's link; one that spans
  // 6 ranks (a mesh axis striding over nodes) the inter-node link.
  EXPECT_EQ(back.link(2, 2).alpha_seconds, 1e-5);
  EXPECT_EQ(back.link(2, 6).alpha_seconds, 3e-5);
  // Per call, and nothing for a view (no work).
  EXPECT_DOUBLE_EQ(back.compute_seconds(OpCost{5e11, 0}, OpKind::matmul), 1 + 3e-6);
  EXPECT_EQ(back.compute_seconds(OpCost{0, 0}, OpKind::view), 0);

  EXPECT_THROW_MSG(global::CostModel::from_json("[1]"), "not a JSON object");
  EXPECT_THROW_MSG(global::CostModel::from_json(R"({"compute": {"flops_per_second": -1,
      "bytes_per_second": 1}})"),
                   "must be finite and not negative, got -1");
  EXPECT_THROW_MSG(global::CostModel::from_json(R"({"compute_by_kind": {"gemm": {}}})"),
                   "'gemm', which is not an op kind");
  EXPECT_THROW_MSG(global::CostModel::from_json(R"({"links": [{"group_size": 1.5}]})"),
                   "group_size must be an integer >= 2");
  EXPECT_THROW_MSG(global::CostModel::from_json(R"({"overlaps_communication": 1})"),
                   "must be true or false");

  // The allocator a profile describes: memory is counted as it reserves.
  // Tessera's CPU allocator: 64-byte multiples up to 4 KiB, four classes
  // per power of two above, whole 2 MiB pages from 2 MiB.
  EXPECT_EQ(back.allocator, global::CostModel::Allocator::cpu);
  EXPECT_EQ(back.allocated_bytes(100), 128);
  EXPECT_EQ(back.allocated_bytes(5000), 5120);
  EXPECT_EQ(back.allocated_bytes(784 * 1024 * 4), 4 << 20);
  model.allocator = global::CostModel::Allocator::exact;
  const global::CostModel exact = global::CostModel::from_json(model.to_json());
  EXPECT_EQ(exact.allocator, global::CostModel::Allocator::exact);
  EXPECT_EQ(exact.allocated_bytes(784 * 1024 * 4), 784 * 1024 * 4);
  EXPECT_THROW_MSG(global::CostModel::from_json(R"({"allocator": "cuda"})"),
                   R"('allocator' must be "cpu" or "exact", got "cuda")");
}

TEST(PlannerCostModel, DeclaredProfilesLoadAndNameTheirSources) {
  for (const char* name : {"dgx_h100.json", "dgx_a100.json"}) {
    const global::CostModel model =
        global::CostModel::from_file(std::string(TESSERA_SOURCE_DIR) + "/profiles/" + name);
    EXPECT_HAS(model.sources, "datasheet");
    EXPECT_HAS(model.sources, "Assumed");
    EXPECT_GT(model.peak_flops_per_second, 1e14);
    EXPECT_EQ(model.ranks_per_node(), 8);
    EXPECT_GT(model.link(8, 8).seconds_per_byte, 0);
    EXPECT_GT(model.link(8, 64).seconds_per_byte, model.link(8, 8).seconds_per_byte);
  }
}

TEST(Planner, PlansADescribedGptWithoutAllocatingIt) {
  GptSpec spec;
  spec.layers = 2;
  spec.d_model = 64;
  spec.heads = 4;
  spec.vocab = 100;
  spec.sequence = 32;
  spec.batch = 8;
  nn::Module::NamedTensors names;
  const graph::Graph step = trace_gpt_step(spec, names);
  int64_t parameters = 0;
  for (const auto& [name, tensor] : names) {
    EXPECT_TRUE(tensor.is_meta()) << name;
    parameters += tensor.numel();
  }
  EXPECT_EQ(parameters, gpt_parameters(spec));
  PlanOptions options;
  options.mesh = Placement::cpu_mesh({2, 2});
  options.model.allocator = global::CostModel::Allocator::exact;  // bytes as asked
  const Plan plan = planner::plan(step, options, names);
  // Every parameter was planned and is trained.
  for (const auto& [name, tensor] : names) {
    const auto found = std::find_if(plan.tensors.begin(), plan.tensors.end(),
                                    [&](const TensorChoice& t) { return t.name == name; });
    ASSERT_NE(found, plan.tensors.end()) << name;
    EXPECT_TRUE(found->trained) << name;
  }
  // Data parallel, pinned: the state is every parameter, its gradient and
  // two moments, whole on every rank.
  options.pinned = {{"input 0", NdSbp({Sbp::split(0), Sbp::split(0)})},
                    {"input 1", NdSbp({Sbp::split(0), Sbp::split(0)})}};
  for (const auto& [name, tensor] : names) options.pinned.emplace(name, NdSbp::broadcast(2));
  const Plan data_parallel = planner::plan(step, options, names);
  EXPECT_DOUBLE_EQ(data_parallel.prediction.state_bytes,
                   4.0 * 4.0 * static_cast<double>(parameters));
  // The free plan starts from data parallelism, so it is never predicted slower.
  EXPECT_LE(plan.prediction.step_seconds, data_parallel.prediction.step_seconds * (1 + 1e-12));
  EXPECT_THROW_MSG(trace_gpt_step(GptSpec{.heads = 3}, names), "heads (3) must divide d_model");
}

// A 4-layer GPT of width 64 traced on meta tensors, its cost graph on
// `mesh`, and search options without integer programs.
struct SmallGpt {
  nn::Module::NamedTensors names;
  graph::Graph step;
  PlanOptions options;
  CostGraph graph;
  SearchOptions local_search;
  explicit SmallGpt(std::vector<int64_t> mesh) {
    GptSpec spec;
    spec.d_model = 64;
    spec.sequence = 32;
    step = trace_gpt_step(spec, names);
    options.mesh = Placement::cpu_mesh(mesh);
    graph = cost_graph_of(step, options, names);
    local_search.ilp_seconds = 0;
  }
};

TEST(PlannerSearch, OnATracedGptTheIntegerProgramProvesTheOptimum) {
  // A 4-layer GPT on 4 ranks in a row: elimination leaves hundreds of
  // nodes, too many for branch and bound, and local search stops far from
  // the optimum (72% above it when this was written); the integer program
  // solves it.
  const SmallGpt gpt({4});
  const CostGraph& graph = gpt.graph;
  const Solution found = solve(graph, gpt.local_search);
  ASSERT_FALSE(found.exact);
  ASSERT_GT(found.remaining, 100);
  IlpOptions exact;
  exact.seconds = 60;
  const IlpSolution optimum = solve_ilp(graph, exact);
  ASSERT_TRUE(optimum.optimal);
  EXPECT_LE(optimum.cost, found.cost * (1 + 1e-9));
  EXPECT_NEAR(optimum.lower_bound, optimum.cost, 1e-9 * optimum.cost);
  std::printf("local search %.6g s, optimum %.6g s (%+.1f%%), %d columns, %.2f s in CBC\n",
              found.cost, optimum.cost, 100 * (found.cost / optimum.cost - 1), optimum.columns,
              optimum.seconds);
  // solve() runs the program itself when branch and bound stops.
  const Solution solved = solve(graph);
  EXPECT_TRUE(solved.exact);
  EXPECT_NEAR(solved.cost, optimum.cost, 1e-9 * optimum.cost);
  const Plan planned = plan(gpt.step, gpt.options, gpt.names);
  EXPECT_TRUE(planned.exact);
  EXPECT_HAS(planned.explain(), "proven optimal");
}

TEST(PlannerSearch, OnATwoDimensionalMeshTooLargeForOneProgramItSearchesAxisByAxis) {
  // The same GPT on [2, 2]: the whole program would have some 8e5 columns,
  // so the search solves one mesh axis at a time.
  const SmallGpt gpt({2, 2});
  const CostGraph& graph = gpt.graph;
  const Solution found = solve(graph, gpt.local_search);
  const Solution axis_by_axis = solve(graph);
  EXPECT_FALSE(axis_by_axis.exact);
  EXPECT_DOUBLE_EQ(graph.cost(axis_by_axis.choice), axis_by_axis.cost);
  EXPECT_LT(axis_by_axis.cost, 0.9 * found.cost);
  std::printf("local search %.6g s, axis by axis %.6g s\n", found.cost, axis_by_axis.cost);

  // On a step small enough for the whole program, the axis-by-axis answer
  // lies between the optimum and local search's.
  Mlp mlp(16, 32, 4);
  const graph::Graph small = mlp.trace(64, 16, true, true);
  const CostGraph small_graph = cost_graph_of(small, gpt.options, mlp.names);
  const IlpSolution optimum = solve_ilp(small_graph);
  ASSERT_TRUE(optimum.optimal);
  SearchOptions by_axis;
  by_axis.exact_limit = 1;
  by_axis.ilp_max_columns = 1;  // as if too large
  const Solution got = solve(small_graph, by_axis);
  by_axis.ilp_seconds = 0;
  const Solution local = solve(small_graph, by_axis);
  ASSERT_GT(local.remaining, 0);  // so branch and bound stopped, and the program was skipped
  EXPECT_GE(got.cost, optimum.cost * (1 - 1e-9));
  EXPECT_LE(got.cost, local.cost * (1 + 1e-9));
}

TEST(PlannerSearch, OnOneMeshAxisTooLargeForOneProgramItSearchesWindowByWindow) {
  // The GPT on 4 ranks in a row with a column limit its whole program
  // exceeds: the search solves windows of consecutive nodes instead, which
  // takes it from local search's answer towards the optimum.
  const SmallGpt gpt({4});
  const CostGraph& graph = gpt.graph;
  const Solution local = solve(graph, gpt.local_search);
  IlpOptions exact;
  exact.seconds = 60;
  const IlpSolution optimum = solve_ilp(graph, exact);
  ASSERT_TRUE(optimum.optimal);
  SearchOptions windows;
  windows.ilp_max_columns = static_cast<size_t>(optimum.columns) / 4;
  windows.ilp_seconds = 40;
  const Solution got = solve(graph, windows);
  EXPECT_FALSE(got.exact);
  EXPECT_DOUBLE_EQ(graph.cost(got.choice), got.cost);
  EXPECT_GE(got.cost, optimum.cost * (1 - 1e-9));
  EXPECT_LT(got.cost, local.cost);
  std::printf("local search %.6g s, window by window %.6g s, optimum %.6g s\n", local.cost,
              got.cost, optimum.cost);
}

TEST(Planner, LayoutScriptsDoNotNest) {
  global::LayoutScript outer({});
  EXPECT_THROW_MSG(global::LayoutScript({}), "scripts do not nest");
  EXPECT_EQ(outer.followed(), 0);
  EXPECT_EQ(outer.missed(), 0);
}
}  // namespace
}  // namespace tessera::planner
