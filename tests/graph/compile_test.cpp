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

}  // namespace
}  // namespace tessera::testing
