// graph::compile: the plan cache, recompiles and their explanation, and
// switching passes off by name.

#include "tessera/graph/compile.h"
#include "testing.h"

namespace tessera::testing {
namespace {

TEST(GraphCompile, CachesPlansBySignatureAndExplainsRecompiles) {
  manual_seed(4);
  nn::Linear fc(6, 3);
  auto forward = graph::compile(
      [&](const TensorVector& in) -> TensorVector { return {relu(fc.forward(in[0]))}; });
  Tensor x = uniform({4, 6}, -1, 1, 2).to(DType::f32);
  EXPECT_TRUE(all_close(forward({x})[0], relu(fc.forward(x))));
  EXPECT_EQ(forward.compiles(), 0);  // the first call runs eagerly
  EXPECT_TRUE(all_close(forward({x})[0], relu(fc.forward(x))));
  EXPECT_EQ(forward.compiles(), 1);
  Tensor x2 = uniform({4, 6}, -1, 1, 3).to(DType::f32);
  EXPECT_TRUE(all_close(forward({x2})[0], relu(fc.forward(x2))));
  EXPECT_EQ(forward.compiles(), 1);  // same signature: the cached plan
  // A new batch size compiles once more, and says why.
  Tensor wide = uniform({8, 6}, -1, 1, 4).to(DType::f32);
  ScopedEnv explain("TESSERA_GRAPH_EXPLAIN", "1");
  ::testing::internal::CaptureStderr();
  EXPECT_TRUE(all_close(forward({wide})[0], relu(fc.forward(wide))));
  const std::string said = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(forward.compiles(), 2);
  EXPECT_HAS(said, "[graph::compile] compiling again (compile 2): input 0 shape [4, 6] -> [8, 6]");
  forward({x});
  EXPECT_EQ(forward.compiles(), 2);  // both plans stay cached
  forward({x.to(DType::f64)}).at(0);
  EXPECT_EQ(forward.compiles(), 3);
}

TEST(GraphCompile, PassesAreSwitchedOffByName) {
  auto fn = [](const TensorVector& in) -> TensorVector {
    Tensor unused = exp(in[0]);
    return {in[0] + 1.0};
  };
  // (Fusion off in both: it would put the unused exp in one node with the add.)
  auto all = graph::compile(fn, {.disabled_passes = {"elementwise_fusion"}});
  auto no_dce = graph::compile(fn, {.disabled_passes = {"dead_code", "elementwise_fusion"}});
  for (int call = 0; call < 2; ++call) {  // the first call is eager
    all({ones({2})});
    no_dce({ones({2})});
  }
  EXPECT_EQ(all.last_graph().nodes().size() + 1, no_dce.last_graph().nodes().size());
  EXPECT_HAS(error_of([&] { graph::compile(fn, {.disabled_passes = {"fusion"}}); }),
             "[graph::compile] unknown pass 'fusion'; valid: simplify_algebra, "
             "common_subexpressions, constant_folding, dead_code, rematerialization, "
             "elementwise_fusion");
  auto never_called = graph::compile(fn);
  EXPECT_HAS(error_of([&] { never_called.last_graph(); }), "has not been compiled yet");
  // The same from the environment, for every compile of the process.
  {
    ScopedEnv off("TESSERA_GRAPH_DISABLE", "dead_code,elementwise_fusion");
    auto from_env = graph::compile(fn);
    for (int call = 0; call < 2; ++call) from_env({ones({2})});
    EXPECT_EQ(from_env.last_graph().nodes().size(), no_dce.last_graph().nodes().size());
  }
  ScopedEnv typo("TESSERA_GRAPH_DISABLE", "dead_code,fusion");
  EXPECT_HAS(error_of([&] { graph::compile(fn); }), "[graph::compile] unknown pass 'fusion'");
}

// The planned peak of a compiled training step is what a run holds: the
// arena (made once, held between runs) and the values each run makes new
// (here the loss the caller gets), measured by the allocator over a run.
TEST(GraphCompile, APlannedPeakIsWhatARunHolds) {
  manual_seed(5);
  nn::Sequential model({std::make_shared<nn::Linear>(64, 256), std::make_shared<nn::ReLU>(),
                        std::make_shared<nn::Linear>(256, 10)});
  optim::SGD optimizer(model.parameters(), {.lr = 0.1});
  auto step = graph::compile([&](const TensorVector& in) -> TensorVector {
    optimizer.zero_grad();
    Tensor loss = cross_entropy(model.forward(in[0]), in[1]);
    loss.backward();
    optimizer.step();
    return {loss};
  });
  const TensorVector batch{randn({32, 64}), randint(0, 10, {32})};
  for (int i = 0; i < 3; ++i) (void)step(batch);
  const int64_t arena = step.last_memory_plan().arena_bytes;
  ASSERT_GT(arena, 0);
  const auto held = static_cast<int64_t>(CpuAllocator::round_size(static_cast<size_t>(arena)));
  CpuAllocator& allocator = CpuAllocator::instance();
  allocator.reset_peak();
  const int64_t before = allocator.stats().current_bytes;
  (void)step(batch);
  const int64_t during = allocator.stats().peak_bytes - before;
  EXPECT_EQ(step.last_planned_peak_bytes(), held + during) << step.last_memory_plan().str();
}

}  // namespace
}  // namespace tessera::testing
