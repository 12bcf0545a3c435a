// Each graph pass, with the IR before and after.

#include <bit>
#include <limits>
#include <random>

#include "tessera/global/collective_ops.h"
#include "tessera/graph/compile.h"
#include "tessera/graph/executor.h"
#include "tessera/graph/fused.h"
#include "tessera/graph/passes/passes.h"
#include "tessera/graph/trace.h"
#include "testing.h"

namespace tessera::testing {
namespace {

using graph::Graph;

std::vector<std::string> op_names(const Graph& graph) {
  std::vector<std::string> names;
  for (const graph::Node& node : graph.nodes()) names.push_back(node.op->name);
  return names;
}

TEST(GraphPasses, DeadCodeEliminationDropsUnusedWorkAndKeepsSideEffects) {
  Tensor running = zeros({3});
  auto fn = [&](const TensorVector& in) -> TensorVector {
    Tensor unused = exp(in[0]);        // read by nothing
    Tensor also_unused = sum(unused);  // nor this
    Tensor noise = rand({3});          // unused, but it advances the generator
    running.add_(in[0]);               // a write: unused result, kept
    return {relu(in[0])};
  };
  const Graph before = graph::trace(fn, {ones({3})});
  EXPECT_EQ(op_names(before),
            (std::vector<std::string>{"exp", "sum", "rand", "add", "copy_", "relu"}));
  const Graph after = graph::eliminate_dead_code(before);
  EXPECT_EQ(op_names(after), (std::vector<std::string>{"rand", "add", "copy_", "relu"}))
      << after.str();
  Tensor x = Tensor::from_vector<float>({-1, 2, -3}, {3});
  EXPECT_EQ(graph::run(after, {x})[0].to_vector<float>(), (std::vector<float>{0, 2, 0}));
  EXPECT_EQ(running.to_vector<float>(), (std::vector<float>{-1, 2, -3}));
}

TEST(GraphPasses, CommonSubexpressionsMergeButRandomDrawsDoNot) {
  auto fn = [](const TensorVector& in) -> TensorVector {
    Tensor a = in[0] * 2.0;
    Tensor b = in[0] * 2.0;  // the same op, attributes and inputs as a
    Tensor c = in[0] * 3.0;  // a different constant
    return {a + b + c + rand({3}) + rand({3})};
  };
  const Graph before = graph::trace(fn, {ones({3})});
  const Graph after = graph::eliminate_common_subexpressions(before);
  // The two full(2)s merge, then the two muls that read them; full(3) and
  // its mul stay, and so does each random draw.
  EXPECT_EQ(before.nodes().size(), after.nodes().size() + 2) << before.str() << after.str();
  const std::vector<std::string> names = op_names(after);
  EXPECT_EQ(std::count(names.begin(), names.end(), "rand"), 2);
  EXPECT_EQ(std::count(names.begin(), names.end(), "mul"), 2);
  Tensor x = Tensor::from_vector<float>({1, 2, 3}, {3});
  manual_seed(9);
  const Tensor merged = graph::run(after, {x})[0];
  manual_seed(9);
  EXPECT_TRUE(all_close(merged, graph::run(before, {x})[0]));
}

}  // namespace
}  // namespace tessera::testing

namespace tessera::testing {
namespace {

// Random graphs of elementwise ops, broadcasts, reductions and views, some
// values computed twice and some never used: every pass keeps the values.
TEST(GraphPasses, RandomGraphsGiveTheSameValuesWithPassesOnAndOff) {
  std::mt19937 random(20261205);
  for (int trial = 0; trial < 40; ++trial) {
    const uint32_t seed = random();
    auto fn = [seed](const TensorVector& in) -> TensorVector {
      std::mt19937 pick(seed);
      std::vector<Tensor> pool{in[0], in[1]};
      auto any = [&] { return pool[pick() % pool.size()]; };
      for (int step = 0; step < 12; ++step) {
        const Tensor a = any(), b = any();
        switch (pick() % 10) {
          case 0:
            pool.push_back(add(a, b));
            break;
          case 1:
            pool.push_back(mul(a, b));
            break;
          case 2:
            pool.push_back(relu(sub(a, b)));
            break;
          case 3:
            pool.push_back(a * 0.5 + 1.0);
            break;
          case 4:
            pool.push_back(add(a, sum(b, {1}, /*keepdim=*/true)));
            break;  // broadcast
          case 5:
            pool.push_back(a.reshape({5, 4}).reshape({4, 5}));
            break;  // views
          case 6:
            pool.push_back(sigmoid(a) * tanh(b) - exp(a * -0.25));
            break;  // a fusible chain with constants between its ops
          case 7:
            pool.push_back(a.t().contiguous().t() / (b * b + 1.0));
            break;  // a strided operand
          case 8:
            pool.push_back(exp(a * -0.5) - sum(b, {0}) * 0.25);
            break;  // a row broadcast into a chain
          default:
            pool.push_back(mul(a, b));
            pool.push_back(mul(a, b));
            break;  // twice
        }
      }
      return {pool.back(), pool[pool.size() / 2]};
    };
    const Graph traced = graph::trace(fn, {ones({4, 5}), ones({4, 5})});
    const Graph optimised = graph::run_passes(traced);  // every pass, in compile's order
    EXPECT_LE(optimised.nodes().size(), traced.nodes().size());
    Tensor x = uniform({4, 5}, -1, 1, static_cast<uint64_t>(trial)).to(DType::f32);
    Tensor y = uniform({4, 5}, -1, 1, static_cast<uint64_t>(trial) + 100).to(DType::f32);
    const TensorVector expected = fn({x, y});
    const TensorVector plain = graph::run(traced, {x, y});
    const TensorVector passed = graph::run(optimised, {x, y});
    // The executor, twice: the second run reuses the first one's arena.
    graph::Executor executor(optimised);
    executor.run({y, x});
    const TensorVector executed = executor.run({x, y});
    // From its arena: a run takes from the allocator at most its outputs.
    const int64_t allocations = CpuAllocator::instance().stats().allocations;
    executor.run({x, y});
    EXPECT_LE(CpuAllocator::instance().stats().allocations - allocations,
              static_cast<int64_t>(expected.size()))
        << "trial " << trial << "\n"
        << optimised.str();
    for (size_t o = 0; o < expected.size(); ++o) {
      EXPECT_TRUE(all_close(executed[o], expected[o])) << "trial " << trial << "\n"
                                                       << optimised.str();
      EXPECT_TRUE(all_close(plain[o], expected[o])) << "trial " << trial << "\n" << traced.str();
      EXPECT_TRUE(all_close(passed[o], expected[o])) << "trial " << trial << "\n"
                                                     << optimised.str();
    }
  }
}

}  // namespace
}  // namespace tessera::testing

namespace tessera::testing {
namespace {

TEST(GraphPasses, AlgebraicSimplificationRemovesIdentitiesAndCollapsesViewChains) {
  auto fn = [](const TensorVector& in) -> TensorVector {
    Tensor same = (in[0] * 1.0 + 0.0) - 0.0;                              // x
    Tensor chained = in[0].reshape({6}).reshape({2, 3}).reshape({3, 2});  // one reshape
    Tensor back = in[0].t().t();                                          // x
    Tensor widened = in[1] * 1.0;  // a cast to f32, then an f32 identity
    Tensor unmoved = in[0].permute({0, 1});  // x
    return {relu(same), chained, relu(back), widened * 2.0, relu(unmoved)};
  };
  Tensor x = Tensor::from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor n = Tensor::from_vector<int64_t>({1, 2}, {2});
  const Graph before = graph::trace(fn, {x, n});
  const Graph after = graph::eliminate_dead_code(graph::simplify_algebra(before));
  const std::vector<std::string> names = op_names(after);
  EXPECT_EQ(std::count(names.begin(), names.end(), "reshape"), 1) << after.str();
  EXPECT_EQ(std::count(names.begin(), names.end(), "permute"), 0) << after.str();
  EXPECT_EQ(std::count(names.begin(), names.end(), "add"), 0) << after.str();
  EXPECT_EQ(std::count(names.begin(), names.end(), "sub"), 0) << after.str();
  EXPECT_EQ(std::count(names.begin(), names.end(), "mul"), 1) << after.str();   // the * 2
  EXPECT_EQ(std::count(names.begin(), names.end(), "cast"), 1) << after.str();  // the widening
  // Every relu reads the input itself.
  for (const graph::Node& node : after.nodes()) {
    if (node.op->name == "relu") {
      EXPECT_EQ(node.inputs[0], after.inputs()[0]) << after.str();
    }
  }
  const TensorVector expected = fn({x, n});
  const TensorVector got = graph::run(after, {x, n});
  for (size_t o = 0; o < expected.size(); ++o) {
    EXPECT_EQ(got[o].shape(), expected[o].shape());
    EXPECT_EQ(got[o].dtype(), expected[o].dtype());
    EXPECT_TRUE(all_close(got[o], expected[o])) << "output " << o;
  }
}

// The gradient of slices that tile a dim, summed, is the slices' gradients
// joined: one cat instead of zero-filled tensors and adds. Slices that leave
// a gap, or a slice gradient read elsewhere too, stay as they are.
TEST(GraphPasses, AlgebraicSimplificationJoinsTheGradientsOfTilingSlices) {
  auto joined = [](const TensorVector& in) -> TensorVector {
    const Shape whole{4, 7};  // three slices of dim 1: [0, 2), [2, 3), [3, 7)
    Tensor sum =
        slice_backward(in[2], whole, 1, 3, 7, 1) + slice_backward(in[0], whole, -1, 0, 2, 1);
    return {exp(sum + slice_backward(in[1], whole, 1, 2, 3, 1))};
  };
  const TensorVector inputs{uniform({4, 2}, -1, 1, 1).to(DType::f32),
                            uniform({4, 1}, -1, 1, 2).to(DType::f32),
                            uniform({4, 4}, -1, 1, 3).to(DType::f32)};
  const Graph after =
      graph::eliminate_dead_code(graph::simplify_algebra(graph::trace(joined, inputs)));
  EXPECT_EQ(op_names(after), (std::vector<std::string>{"cat", "exp"})) << after.str();
  EXPECT_HAS(after.str(), "cat(%0, %1, %2) {dim=1}");
  EXPECT_TRUE(equal(graph::run(after, inputs)[0], joined(inputs)[0])) << after.str();

  auto gap = [](const TensorVector& in) -> TensorVector {
    return {slice_backward(in[0], {4, 7}, 1, 0, 2, 1) + slice_backward(in[2], {4, 7}, 1, 3, 7, 1)};
  };
  auto shared = [](const TensorVector& in) -> TensorVector {
    Tensor left = slice_backward(in[0], {4, 3}, 1, 0, 2, 1);
    return {left + slice_backward(in[1], {4, 3}, 1, 2, 3, 1), left};
  };
  for (const auto& fn : {graph::TracedFn(gap), graph::TracedFn(shared)}) {
    const Graph kept = graph::simplify_algebra(graph::trace(fn, inputs));
    const std::vector<std::string> names = op_names(kept);
    EXPECT_EQ(std::count(names.begin(), names.end(), "cat"), 0) << kept.str();
    EXPECT_EQ(std::count(names.begin(), names.end(), "add"), 1) << kept.str();
  }
}

// Forwarding x * 1 to x would make a result share the tensor a later
// in-place write changes, or a graph output alias an input: neither happens.
TEST(GraphPasses, AlgebraicSimplificationNeverMakesEagerCopiesShared) {
  Tensor p = Tensor::from_vector<float>({1, 2}, {2});
  auto fn = [&](const TensorVector& in) -> TensorVector {
    Tensor before = p * 1.0;
    p.add_(in[0]);
    return {before + 0.0, in[0] * 1.0};
  };
  const Graph simplified = graph::simplify_algebra(graph::trace(fn, {zeros({2})}));
  const TensorVector out = graph::run(simplified, {ones({2})});
  EXPECT_EQ(out[0].to_vector<float>(), (std::vector<float>{1, 2}));  // p before the write
  EXPECT_EQ(p.to_vector<float>(), (std::vector<float>{2, 3}));
  EXPECT_NE(simplified.outputs()[1], simplified.inputs()[0]);
}

}  // namespace
}  // namespace tessera::testing

namespace tessera::testing {
namespace {

// A chain of elementwise ops becomes one fused node that writes only what
// leaves it; the values are eager's, bit for bit.
TEST(GraphPasses, ElementwiseFusionRunsAChainAsOneNode) {
  auto fn = [](const TensorVector& in) -> TensorVector {
    Tensor h = relu(in[0] * 2.0 + in[1]);
    Tensor kept = sigmoid(h);                // read after the chain: written
    Tensor s = sum(kept);                    // not elementwise: ends the group
    return {tanh(kept - 1.0) * s, h * 0.5};  // h is returned, so written too
  };
  Tensor x = uniform({3, 5000}, -2, 2, 1).to(DType::f32);  // several tiles
  Tensor y = uniform({3, 5000}, -2, 2, 2).to(DType::f32);
  const Graph before = graph::trace(fn, {x, y});
  const Graph after = graph::fuse_elementwise(before);
  // before: full mul add relu sigmoid sum full sub tanh mul full mul
  // after:  full fused(mul add relu sigmoid) sum full full fused(sub tanh mul mul),
  // the full(0.5) between the second group's ops moved before it
  EXPECT_EQ(op_names(after), (std::vector<std::string>{"full", "fused_elementwise", "sum", "full",
                                                       "full", "fused_elementwise"}))
      << before.str() << after.str();
  EXPECT_HAS(after.str(), "fused_elementwise(%0, %2, %1) {ops=\"[mul, add, relu, sigmoid]\"}");
  const graph::Node& first = after.nodes()[1];
  EXPECT_EQ(first.outputs.size(), 2u) << after.str();  // relu (returned as h) and sigmoid
  const TensorVector expected = fn({x, y});
  const TensorVector got = graph::run(after, {x, y});
  for (size_t o = 0; o < expected.size(); ++o) {
    EXPECT_TRUE(equal(got[o], expected[o])) << "output " << o;
  }
}

// Operands that broadcast to the chain's shape join the chain: each is
// gathered tile by tile, at tile edges that fall mid-row, and the values
// are eager's, bit for bit.
TEST(GraphPasses, ElementwiseFusionGathersBroadcastOperands) {
  auto fn = [](const TensorVector& in) -> TensorVector {
    // in[0]: [5, 37, 23]; the others broadcast to it.
    Tensor h = (in[0] - in[1]) * in[2];  // a row [23], a column [5, 37, 1]
    Tensor g = exp(h * in[3]) + in[4];   // a middle [5, 1, 23], a [37, 1]
    return {tanh(g) / (in[1] + 2.0)};    // a row made by a node of its own
  };
  const TensorVector inputs{
      uniform({5, 37, 23}, -1, 1, 1).to(DType::f32), uniform({23}, -1, 1, 2).to(DType::f32),
      uniform({5, 37, 1}, -1, 1, 3).to(DType::f32), uniform({5, 1, 23}, -1, 1, 4).to(DType::f32),
      uniform({37, 1}, -1, 1, 5).to(DType::f32)};
  const Graph after = graph::fuse_elementwise(graph::trace(fn, inputs));
  const std::vector<std::string> names = op_names(after);
  EXPECT_EQ(std::count(names.begin(), names.end(), "fused_elementwise"), 1) << after.str();
  EXPECT_EQ(names.size(), 3u) << after.str();  // full(2), the [23] add, the chain
  EXPECT_HAS(after.str(),
             "fused_elementwise(%0, %1, %2, %3, %4, %6) "
             "{ops=\"[sub, mul, mul, exp, add, tanh, div]\"}");
  const Tensor expected = fn(inputs)[0];
  EXPECT_TRUE(equal(graph::run(after, inputs)[0], expected)) << after.str();
  graph::Executor executor(graph::run_passes(graph::trace(fn, inputs)));
  executor.run(inputs);
  EXPECT_TRUE(equal(executor.run(inputs)[0], expected));
  // A strided operand (a transpose, an expanded row) is read in place,
  // tile by tile, as the unfused ops read it; the run allocates nothing.
  const Graph pair = graph::fuse_elementwise(graph::trace(
      [](const TensorVector& in) -> TensorVector { return {exp(in[0] * 2.0) + in[1]}; },
      {ones({40, 70}), ones({40, 70})}));
  ASSERT_TRUE(pair.nodes().back().fused != nullptr) << pair.str();
  const Tensor transposed = uniform({70, 40}, -1, 1, 6).to(DType::f32).t();
  const Tensor expanded = uniform({70}, -1, 1, 7).to(DType::f32).expand({40, 70});
  const Tensor out = Tensor::empty({40, 70}, DType::f32);
  EXPECT_HAS(pair.str(), "fused_elementwise(%0, %2, %1)");  // %2: the 2
  const TensorVector operands{transposed, full({}, 2.0), expanded};
  const int64_t allocations = CpuAllocator::instance().stats().allocations;
  graph::run_fused_into(*pair.nodes().back().fused, operands, {out});
  EXPECT_EQ(CpuAllocator::instance().stats().allocations, allocations);
  EXPECT_TRUE(equal(out, exp(transposed * 2.0) + expanded));
  // An operand that does not broadcast to the output's shape is refused.
  const Graph single = graph::trace(
      [](const TensorVector& in) -> TensorVector { return {exp(in[0] * 2.0) + in[1]}; },
      {ones({4, 6}), ones({6})});
  const Graph fused = graph::fuse_elementwise(single);
  const graph::Node& node = fused.nodes().back();
  ASSERT_TRUE(node.fused != nullptr);
  EXPECT_HAS(error_of([&] {
               graph::run_fused(*node.fused, {ones({4, 6}), full({}, 2.0), ones({4})},
                                {ones({4, 6}).meta()});
             }),
             "[fused_elementwise] an input of shape [4] does not broadcast to the output's [4, 6]");
}

// A chain of the ops the CPU's chain kernel keeps in registers (add, sub,
// mul, div, maximum, minimum, neg, abs, relu, sqrt) gives the unfused ops'
// bits: NaNs (which maximum and minimum pass on, a's first), signed zeros
// (relu and abs keep -0), infinities, scalar and strided operands, and
// lengths that end inside a register, a block and a tile.
TEST(GraphPasses, FusedChainsGiveTheUnfusedOpsBits) {
  auto fn = [](const TensorVector& in) -> TensorVector {
    // One chain: each op reads the one before it (and inputs or numbers).
    Tensor t = relu(in[0]) - in[1];
    t = maximum(t, in[1]) * 1.5;
    t = minimum(in[1], t) / in[1];
    const Tensor middle = neg(abs(t)) + 0.25;  // a result the chain goes on from
    return {sqrt(abs(relu(middle) - 2.0)) - in[0], middle};
  };
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> special{nan,    -0.0f, 0.0f,  inf,  -inf, 1.5f, -2.25f,
                                   1e-40f, -3.0f, 0.75f, -nan, 7.0f, -0.5f};
  for (const int64_t n : {1, 15, 16, 17, 130, 4096 + 133}) {
    std::vector<float> a(static_cast<size_t>(n)), b(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) {
      a[static_cast<size_t>(i)] = special[static_cast<size_t>(i) % special.size()];
      b[static_cast<size_t>(i)] = special[static_cast<size_t>(i * 5 + 3) % special.size()];
    }
    // in[1] read through a transpose: a strided operand of the chain.
    const Tensor x = Tensor::from_vector<float>(a, {n, 1});
    const Tensor y = Tensor::from_vector<float>(b, {1, n}).t();
    const Graph fused = graph::fuse_elementwise(graph::trace(fn, {x, y}));
    const TensorVector expected = fn({x, y});
    const TensorVector got = graph::run(fused, {x, y});
    EXPECT_HAS(fused.str(),
               "fused_elementwise(%0, %1, %2, %3, %4) {ops=\"[relu, sub, maximum, mul, minimum, "
               "div, abs, neg, add, relu, sub, abs, sqrt, sub]\"}");
    for (size_t o = 0; o < expected.size(); ++o) {
      const std::vector<float> want = expected[o].to_vector<float>();
      const std::vector<float> have = got[o].to_vector<float>();
      ASSERT_EQ(want.size(), have.size());
      for (size_t i = 0; i < want.size(); ++i) {
        EXPECT_EQ(std::bit_cast<uint32_t>(want[i]), std::bit_cast<uint32_t>(have[i]))
            << "output " << o << " element " << i << " of " << n << ": " << want[i] << " vs "
            << have[i] << "\n"
            << fused.str();
      }
    }
  }
}

// Nodes with side effects are never moved across a group, and a write to a
// tensor the group reads ends the group before it.
TEST(GraphPasses, ElementwiseFusionKeepsWritesAndDrawsInOrder) {
  Tensor state = Tensor::from_vector<float>({1, 2, 3}, {3});
  auto fn = [&](const TensorVector& in) -> TensorVector {
    Tensor a = exp(in[0] * state);
    state.mul_(2.0);  // after a read it: a must see the old values
    Tensor b = a + state;
    return {b * rand({3})};
  };
  Tensor x = Tensor::from_vector<float>({0.5f, -1, 2}, {3});
  const Graph fused = graph::fuse_elementwise(graph::trace(fn, {x}));
  Tensor state_copy = state.clone();
  manual_seed(3);
  const Tensor got = graph::run(fused, {x})[0];
  Tensor graph_state = state.clone();
  state.copy_(state_copy);
  manual_seed(3);
  const Tensor expected = fn({x})[0];
  EXPECT_TRUE(equal(got, expected)) << fused.str();
  EXPECT_TRUE(equal(graph_state, state));
}

}  // namespace
}  // namespace tessera::testing

namespace tessera::testing {
namespace {

TEST(GraphPasses, ConstantFoldingEvaluatesNumbersOnceAndLeavesDrawsAlone) {
  auto fn = [](const TensorVector& in) -> TensorVector {
    Tensor two = full({}, 2.0);
    Tensor scale = exp(two) * 0.5;  // numbers only: folded
    Tensor noise = rand({});        // a draw: never folded
    return {in[0] * scale + noise, in[0] + 1.0};
  };
  const Graph before = graph::trace(fn, {ones({3})});
  const Graph after = graph::eliminate_dead_code(graph::fold_constants(before));
  EXPECT_EQ(op_names(after), (std::vector<std::string>{"rand", "mul", "add", "add"}))
      << before.str() << after.str();
  Tensor x = Tensor::from_vector<float>({1, 2, 3}, {3});
  manual_seed(4);
  const TensorVector got = graph::run(after, {x});
  manual_seed(4);
  const TensorVector expected = fn({x});
  for (size_t o = 0; o < expected.size(); ++o) EXPECT_TRUE(equal(got[o], expected[o]));
}

}  // namespace
}  // namespace tessera::testing

namespace tessera::testing {
namespace {

// A two-layer MLP's training step (loss and backward) traced at batch 32;
// the memory-planning tests share it. Seed before constructing.
struct MlpTrainingStep {
  nn::Linear first{64, 256}, second{256, 10};
  Tensor x = randn({32, 64});
  Tensor labels = randint(0, 10, {32});
  Graph traced = graph::trace(
      [this](const TensorVector& in) -> TensorVector {
        Tensor loss = cross_entropy(second.forward(relu(first.forward(in[0]))), in[1]);
        loss.backward();
        return {loss};
      },
      {x, labels});
};

// A training step's temporaries share one arena: smaller than the values
// without reuse, never below the most bytes live at once.
TEST(GraphPasses, MemoryPlanningReusesMemoryAcrossLifetimes) {
  manual_seed(1);
  MlpTrainingStep step;
  const Graph& traced = step.traced;
  const Tensor &x = step.x, &labels = step.labels;
  const graph::MemoryPlan plan = graph::plan_memory(traced);
  EXPECT_GT(plan.arena_bytes, 0);
  EXPECT_LT(plan.arena_bytes, plan.unplanned_bytes) << plan.str();
  EXPECT_GE(plan.arena_bytes, plan.lower_bound) << plan.str();
  // The loss is the caller's, never in the arena; the gradients are, live
  // to the end of the run.
  for (int id : traced.outputs()) EXPECT_LT(plan.offsets[static_cast<size_t>(id)], 0);
  for (const graph::GradWrite& write : traced.grad_writes()) {
    EXPECT_GE(plan.offsets[static_cast<size_t>(plan.roots[static_cast<size_t>(write.value)])], 0);
  }
  EXPECT_HAS(plan.str(), "lower bound");
  // Runs from the arena give the interpreter's values and gradients.
  graph::Executor executor(traced);
  const double loss = executor.run({x, labels})[0].item<double>();
  const Tensor weight_grad = step.first.weight.grad().clone();
  step.first.weight.impl().grad.reset();
  EXPECT_EQ(loss, graph::run(traced, {x, labels})[0].item<double>());
  EXPECT_TRUE(equal(step.first.weight.grad(), weight_grad));
}

// A cheap value read early and again much later is computed again for the
// late readers when its inputs are live then anyway, so its memory is free
// in between; where an input would have to be kept for it, it is not.
TEST(GraphPasses, RematerializationRecomputesACheapValueForItsLateReaders) {
  auto step = [](const TensorVector& in) -> TensorVector {
    Tensor u = in[0] * 2.0;
    Tensor v = exp(u);       // read now and at the end
    Tensor early = v.sum();  // its early reader
    Tensor other = in[1];
    for (int i = 0; i < 5; ++i) {  // 20 nodes between, three tensors live at once
      const Tensor a = tanh(other);
      other = a * (a + 0.5) - 1.0;
    }
    Tensor late = v * u;  // u is read here anyway: v is recomputed
    Tensor keep = exp(in[0] * 3.0);
    Tensor unused = keep.sum();  // keep's input dies before its late read
    Tensor again = keep * other;
    return {early + unused, late + other, again};
  };
  const TensorVector inputs{uniform({64, 64}, -1, 1, 1).to(DType::f32),
                            uniform({64, 64}, -1, 1, 2).to(DType::f32)};
  const Graph before = graph::eliminate_dead_code(graph::trace(step, inputs));
  const Graph after = graph::rematerialize(before);
  auto count = [](const Graph& graph, const char* name) {
    const std::vector<std::string> names = op_names(graph);
    return std::count(names.begin(), names.end(), name);
  };
  EXPECT_EQ(count(before, "exp"), 2) << before.str();
  EXPECT_EQ(count(after, "exp"), 3) << after.str();  // v twice, keep once
  // The late mul reads the second exp, made just before it.
  const auto& nodes = after.nodes();
  for (size_t n = 1; n < nodes.size(); ++n) {
    if (nodes[n].op->name == "mul" && nodes[n - 1].op->name == "exp") {
      EXPECT_EQ(nodes[n].inputs[0], nodes[n - 1].outputs[0]) << after.str();
    }
  }
  const TensorVector expected = step(inputs);
  const TensorVector got = graph::run(after, inputs);
  for (size_t o = 0; o < expected.size(); ++o) EXPECT_TRUE(equal(got[o], expected[o])) << o;
  // The recomputed value's 16 KiB are free while the chain runs, its peak.
  EXPECT_LT(graph::plan_memory(after).arena_bytes, graph::plan_memory(before).arena_bytes);
}

// An out-of-place collective may run while the nodes after it do: the
// executor waits for it before the last node that uses its outputs, and
// until then its input's memory is not handed to anything else (without
// that, the nodes between would reuse it while the collective reads it).
TEST(GraphPasses, MemoryPlanningKeepsAnAsyncCollectivesInputUntilItIsAwaited) {
  auto step = [](const TensorVector& in) -> TensorVector {
    Tensor a = in[0] * 2.0;                  // dies at the collective
    Tensor reduced = global::all_reduce(a);  // a group of one rank here
    Tensor b = exp(in[1]);                   // independent work, overlapped
    Tensor c = tanh(b * 3.0);
    return {reduced * c};  // the collective's only reader
  };
  const TensorVector inputs{uniform({64, 64}, -1, 1, 1).to(DType::f32),
                            uniform({64, 64}, -1, 1, 2).to(DType::f32)};
  const Graph traced = graph::trace(step, inputs);
  const graph::MemoryPlan plan = graph::plan_memory(traced);
  const auto& nodes = traced.nodes();
  auto node_of = [&](const std::string& name, int skip = 0) {
    for (size_t n = 0; n < nodes.size(); ++n) {
      if (nodes[n].op->name == name && skip-- == 0) return n;
    }
    ADD_FAILURE() << "no node " << name << "\n" << traced.str();
    return size_t{0};
  };
  const size_t collective = node_of("all_reduce");
  const size_t reader = node_of("mul", 2);  // in[0] * 2, b * 3, reduced * c
  ASSERT_EQ(nodes[reader].inputs[0], nodes[collective].outputs[0]) << traced.str();
  EXPECT_EQ(plan.collective_ready[collective], static_cast<int>(reader)) << traced.str();
  for (size_t n = 0; n < nodes.size(); ++n) {
    if (n != collective) {
      EXPECT_EQ(plan.collective_ready[n], -1) << n;
    }
  }
  const int64_t kept = plan.offsets[static_cast<size_t>(nodes[collective].inputs[0])];
  ASSERT_GE(kept, 0) << plan.str();
  const int64_t bytes = 64 * 64 * 4;
  for (size_t n = collective + 1; n < reader; ++n) {
    const int64_t offset = plan.offsets[static_cast<size_t>(nodes[n].outputs[0])];
    if (offset < 0) continue;
    EXPECT_TRUE(offset + bytes <= kept || kept + bytes <= offset)
        << "node " << n << " at " << offset << " overlaps the collective's input at " << kept
        << "\n"
        << traced.str();
  }
  EXPECT_TRUE(graph::may_run_async(nodes[collective]));
  graph::Executor executor(traced);
  executor.run(inputs);
  EXPECT_TRUE(equal(executor.run(inputs)[0], step(inputs)[0]));
}

// In-place reuse: an elementwise node whose input dies there writes its
// output over it. A chain of three such nodes needs one buffer, where two
// would be live at once without it; a node that also reads its dying input
// through a transposing view must not write over it.
TEST(GraphPasses, MemoryPlanningWritesOverADyingInputInPlace) {
  auto chain = [](const TensorVector& in) -> TensorVector {
    Tensor a = in[0] * 2.0;  // 64 x 64 floats: 16 KiB
    Tensor b = exp(a);       // a dies here
    Tensor c = b - 1.0;      // b dies here
    return {c.sum()};
  };
  const Tensor x = uniform({64, 64}, -1, 1, 3).to(DType::f32);
  const Graph traced = graph::trace(chain, {x});
  const graph::MemoryPlan plan = graph::plan_memory(traced);
  EXPECT_HAS(plan.heuristic, "in place");
  // One 16 KiB buffer, and 64 bytes (aligned) that the two 0-d numbers
  // take in turn.
  EXPECT_EQ(plan.arena_bytes, 64 * 64 * 4 + 64) << plan.str();
  std::vector<int64_t> placed;  // the three 64 x 64 values' offsets
  for (size_t v = 0; v < traced.values().size(); ++v) {
    if (traced.values()[v].meta.shape == Shape{64, 64} && plan.offsets[v] >= 0) {
      placed.push_back(plan.offsets[v]);
    }
  }
  ASSERT_EQ(placed.size(), 3u) << traced.str();
  EXPECT_TRUE(placed[0] == placed[1] && placed[1] == placed[2]) << traced.str();
  graph::Executor executor(traced);
  for (int run = 0; run < 2; ++run) {
    EXPECT_TRUE(all_close(executor.run({x})[0], chain({x})[0], 1e-6, 1e-6));
  }

  auto transposed = [](const TensorVector& in) -> TensorVector {
    Tensor a = in[0] * 2.0;
    return {(a * a.t()).sum()};  // a dies at the product, read through a view too
  };
  const Graph traced_t = graph::trace(transposed, {x});
  const graph::MemoryPlan plan_t = graph::plan_memory(traced_t);
  EXPECT_GE(plan_t.arena_bytes, 2 * 64 * 64 * 4) << plan_t.str() << traced_t.str();
  graph::Executor executor_t(traced_t);
  EXPECT_TRUE(all_close(executor_t.run({x})[0], transposed({x})[0], 1e-5, 1e-4));
}

// A fused chain writes over a dying input only when its one result is its
// last step: with two results, the first would be written while the tile
// loop still reads the input.
TEST(GraphPasses, MemoryPlanningWritesAFusedChainInPlaceOnlyWithOneResult) {
  const Tensor x = uniform({64, 64}, -1, 1, 4).to(DType::f32);
  const Tensor w = uniform({64, 64}, -1, 1, 5).to(DType::f32);
  auto offset_of_shape = [](const Graph& graph, const graph::MemoryPlan& plan) {
    std::vector<int64_t> placed;  // the 64 x 64 values the nodes make
    for (const graph::Node& node : graph.nodes()) {
      for (int out : node.outputs) {
        if (graph.value(out).meta.shape == Shape{64, 64}) {
          placed.push_back(plan.offsets[static_cast<size_t>(out)]);
        }
      }
    }
    return placed;
  };
  auto one_result = [](const TensorVector& in) -> TensorVector {
    Tensor a = matmul(in[0], in[1]);  // not fusable: the fused node's input
    return {(exp(a) - 1.0).sum()};
  };
  const Graph fused = graph::run_passes(graph::trace(one_result, {x, w}));
  const graph::MemoryPlan plan = graph::plan_memory(fused);
  const std::vector<int64_t> placed = offset_of_shape(fused, plan);
  ASSERT_EQ(placed.size(), 2u) << fused.str();  // the product and the fused node's result
  EXPECT_EQ(placed[0], placed[1]) << fused.str() << plan.str();
  EXPECT_HAS(plan.heuristic, "in place");
  graph::Executor executor(fused);
  EXPECT_TRUE(all_close(executor.run({x, w})[0], one_result({x, w})[0], 1e-5, 1e-4));

  auto two_results = [](const TensorVector& in) -> TensorVector {
    Tensor a = matmul(in[0], in[1]);
    Tensor b = exp(a);
    Tensor c = b - 1.0;
    return {b.sum(), c.sum()};  // b and c both leave the fused node
  };
  const Graph fused2 = graph::run_passes(graph::trace(two_results, {x, w}));
  const graph::MemoryPlan plan2 = graph::plan_memory(fused2);
  const std::vector<int64_t> placed2 = offset_of_shape(fused2, plan2);
  ASSERT_EQ(placed2.size(), 3u) << fused2.str();
  EXPECT_NE(placed2[0], placed2[1]) << fused2.str() << plan2.str();
  EXPECT_NE(placed2[0], placed2[2]) << fused2.str() << plan2.str();
  graph::Executor executor2(fused2);
  const TensorVector got = executor2.run({x, w}), want = two_results({x, w});
  EXPECT_TRUE(all_close(got[0], want[0], 1e-5, 1e-4));
  EXPECT_TRUE(all_close(got[1], want[1], 1e-5, 1e-4));
}

// A reshape whose input's layout it cannot view copies first, as an op of
// its own: eager's values and gradients are as before, and a traced graph
// holds the copy as a node whose memory the plan places in the arena
// (inside the reshape it was new memory on every run).
TEST(GraphPasses, AReshapeThatCopiesPlacesItsCopyInTheArena) {
  Tensor x = Tensor::from_vector<float>({0, 1, 2, 3, 4, 5}, {2, 3}).set_requires_grad();
  Tensor flat = x.transpose(0, 1).reshape({6});
  EXPECT_EQ(flat.to_vector<float>(), (std::vector<float>{0, 3, 1, 4, 2, 5}));
  (flat * Tensor::from_vector<float>({0, 1, 2, 3, 4, 5}, {6})).sum().backward();
  EXPECT_EQ(x.grad().to_vector<float>(), (std::vector<float>{0, 2, 4, 1, 3, 5}));

  auto fn = [](const TensorVector& in) -> TensorVector {
    return {(exp(in[0]).transpose(0, 1).reshape({-1}) * 2.0).sum()};
  };
  const Tensor input = uniform({64, 32}, -1, 1, 5).to(DType::f32);
  const Graph traced = graph::trace(fn, {input});
  const graph::MemoryPlan plan = graph::plan_memory(traced);
  int copies = 0;
  for (const graph::Node& node : traced.nodes()) {
    if (node.op->name != "copy") continue;
    ++copies;
    EXPECT_GE(plan.offsets[static_cast<size_t>(node.outputs[0])], 0) << traced.str();
  }
  EXPECT_EQ(copies, 1) << traced.str();
  graph::Executor executor(traced);
  EXPECT_TRUE(all_close(executor.run({input})[0], fn({input})[0], 1e-5, 1e-5));
}

// A kernel's scratch memory (its Workspace: a convolution's unfolded or
// reordered operands) is planned in the arena once a run has shown how much
// it takes: the run that plans again never holds both arenas, from then on a
// run of a convolution's training step makes no memory but its output, and
// its values stay the interpreter's.
TEST(GraphPasses, KernelWorkspacesArePlannedInTheArenaAfterARun) {
  manual_seed(2);
  nn::Conv2d conv(3, 8, 3, 1, 1);
  auto fn = [&](const TensorVector& in) -> TensorVector {
    Tensor loss = square(conv.forward(in[0])).mean();
    loss.backward();
    return {loss};
  };
  const Tensor x = randn({4, 3, 32, 32});
  const Graph traced = graph::trace(fn, {x});
  graph::Executor executor(traced);
  auto workspaces = [&] {
    int64_t placed = 0;
    for (int64_t offset : executor.memory().workspace_offsets) placed += offset >= 0;
    return placed;
  };
  EXPECT_EQ(workspaces(), 0);  // nothing known before a run
  const int64_t arena_before = executor.memory().arena_bytes;
  std::vector<double> losses;
  for (int run = 0; run < 3; ++run) {
    const int64_t before = CpuAllocator::instance().stats().current_bytes;
    CpuAllocator::instance().reset_peak();
    losses.push_back(executor.run({x})[0].item<double>());
    const int64_t taken = CpuAllocator::instance().stats().peak_bytes - before;
    if (run == 0) {
      EXPECT_GT(taken, 64 << 10) << "the first run's kernels take their own scratch";
    }
    if (run == 1) {  // plans again: the old arena goes before the new one comes
      EXPECT_LT(taken, arena_before) << executor.memory().str();
    }
    if (run == 2) {
      EXPECT_LT(taken, 4 << 10) << executor.memory().str();
    }
  }
  EXPECT_GE(workspaces(), 1) << traced.str();
  EXPECT_GT(executor.memory().arena_bytes, arena_before);
  EXPECT_EQ(losses[2], losses[0]);
  EXPECT_EQ(losses[0], graph::run(traced, {x})[0].item<double>());
}

// plan_memory(graph, variant) places as the full search did when given the
// variant it chose (a dynamic dim's re-plan relies on it); a bad number is
// an error naming the valid range.
TEST(GraphPasses, MemoryPlanningCanRepeatTheChosenPlacement) {
  manual_seed(1);
  const MlpTrainingStep step;
  const Graph& traced = step.traced;
  const graph::MemoryPlan best = graph::plan_memory(traced);
  ASSERT_GE(best.variant, 0);
  const graph::MemoryPlan again = graph::plan_memory(traced, best.variant);
  EXPECT_EQ(again.variant, best.variant);
  EXPECT_EQ(again.heuristic, best.heuristic);
  EXPECT_EQ(again.arena_bytes, best.arena_bytes);
  EXPECT_EQ(again.offsets, best.offsets);
  EXPECT_EQ(again.unplanned_bytes, best.unplanned_bytes);
  EXPECT_HAS(error_of([&] { graph::plan_memory(traced, 8); }),
             "[graph::plan_memory] variant 8 is not -1 (try all) or a placement in [0, 8)");
  EXPECT_HAS(error_of([&] { graph::plan_memory(traced, -2); }), "variant -2");
}

}  // namespace
}  // namespace tessera::testing
