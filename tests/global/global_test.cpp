// Global tensors: layout arithmetic in process, and the multi-process checks
// of global_worker.cpp (boxing, every op in every signature, autograd,
// errors) started through tessera-run on 2, 3 and 4 ranks.

#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "tessera/graph/trace.h"
#include "testing.h"

namespace tessera::testing {
namespace {

TEST(PlacementTest, InternedAndDescribed) {
  Placement a = Placement::cpu(4);
  Placement b(DeviceType::cpu, {0, 1, 2, 3});
  EXPECT_TRUE(a == b);
  EXPECT_FALSE(a == Placement::cpu_mesh({2, 2}));
  EXPECT_EQ(placement_str(Placement::cpu_mesh({2, 2})), "cpu:[0, 1, 2, 3] as [2, 2]");
  EXPECT_EQ(Placement::cpu_mesh({2, 2}).coordinate(3), std::vector<int64_t>({1, 1}));
  EXPECT_EQ(Placement::cpu_mesh({2, 3}).index_at({1, 2}), 5);
  EXPECT_EQ(Placement(DeviceType::cpu, {3, 1}).index_of(1), 1);
  EXPECT_EQ(Placement(DeviceType::cpu, {3, 1}).index_of(0), -1);
  EXPECT_TRUE(NdSbp({Sbp::split(1), Sbp::broadcast()}) == NdSbp({Sbp::split(1), Sbp::broadcast()}));
  EXPECT_EQ(nd_sbp_str(NdSbp({Sbp::partial_sum(), Sbp::split(0)})), "(P(sum), S(0))");
  EXPECT_HAS(error_of([] { Placement(DeviceType::cpu, {0, 0}); }), "listed twice");
  EXPECT_HAS(error_of([] { Placement(DeviceType::cpu, {0, 1, 2}, {2, 2}); }), "holds 4 ranks");
}

TEST(LayoutTest, UnevenSplitsGiveTheFirstPartsTheExtra) {
  EXPECT_EQ(global::split_range(7, 3, 0).size, 3);
  EXPECT_EQ(global::split_range(7, 3, 1).start, 3);
  EXPECT_EQ(global::split_range(7, 3, 2).size, 2);
  EXPECT_EQ(global::split_range(2, 4, 3).size, 0);
  // Nested: axis 0 splits rows 7 -> 4 | 3, axis 1 splits each again.
  Placement mesh = Placement::cpu_mesh({2, 2});
  NdSbp sbp({Sbp::split(0), Sbp::split(0)});
  global::Region r = global::shard_region({7, 5}, mesh, sbp, 3);
  EXPECT_EQ(r.start, std::vector<int64_t>({6, 0}));
  EXPECT_EQ(r.size, Shape({1, 5}));
  NdSbp cols({Sbp::split(1), Sbp::broadcast()});
  EXPECT_HAS(error_of([&] { global::check_layout({4}, mesh, cols, "op"); }), "splits dim 1");
  EXPECT_HAS(error_of([&] { global::check_layout({4}, mesh, NdSbp(Sbp::split(0)), "op"); }),
             "one Sbp per mesh axis");
}

TEST(GlobalTensorTest, OneProcessWithoutInit) {
  // No init_process_group: the default group is this process alone.
  Placement one = Placement::cpu(1);
  Tensor x = uniform({4, 3}, -1, 1, 5, DType::f32);
  Tensor g = x.to_global(one, Sbp::split(0));
  EXPECT_TRUE(g.is_global());
  EXPECT_EQ(g.shape(), Shape({4, 3}));
  EXPECT_TRUE(all_close(g.to_global(one, Sbp::broadcast()).to_local(), x));
  Tensor y = matmul(g, g.t());
  EXPECT_TRUE(y.is_global());
  EXPECT_TRUE(all_close(y.to_local(), matmul(x, x.t())));
  EXPECT_HAS(to_string(y), "sbp=");
  EXPECT_EQ(g.to_vector<float>(), x.to_vector<float>());
  EXPECT_HAS(error_of([&] { (void)g.data<float>(); }), "to_local");
}

// A global reshape that its shards cannot view copies them: the result is
// no view of its input (it does not keep the input's memory alive, nor take
// its in-place checks), as a local reshape that copies is none; one that
// views is.
TEST(GlobalTensorTest, AReshapeThatCopiesIsNoViewOfItsInput) {
  Placement one = Placement::cpu(1);
  Tensor x = uniform({4, 3, 2}, -1, 1, 6, DType::f32).to_global(one, Sbp::split(0));
  Tensor copied = x.permute({0, 2, 1}).reshape({4, 6});
  EXPECT_FALSE(copied.is_view());
  EXPECT_FALSE(copied.shares_storage(x));
  Tensor viewed = x.reshape({4, 6});
  EXPECT_TRUE(viewed.is_view());
  EXPECT_TRUE(viewed.shares_storage(x));
  Tensor kept = x.permute({0, 2, 1});
  const std::weak_ptr<TensorImpl> input = kept.impl_ptr();
  Tensor result = kept.reshape({4, 6});
  kept = Tensor();
  EXPECT_TRUE(input.expired());  // the copy holds nothing of what it copied
  EXPECT_TRUE(all_close(result.to_local(), x.to_local().permute({0, 2, 1}).reshape({4, 6})));
  // Traced, the copy is a node of its own (memory the graph's plan places)
  // and the reshape a view of it, as for a local tensor.
  const graph::Graph traced = graph::trace(
      [](const TensorVector& in) -> TensorVector {
        return {in[0].permute({0, 2, 1}).reshape({4, 6}) * 2.0};
      },
      {x});
  std::vector<std::string> ops;
  for (const graph::Node& node : traced.nodes()) ops.push_back(node.op->name);
  const auto copy = std::find(ops.begin(), ops.end(), "copy");
  ASSERT_NE(copy, ops.end()) << traced.str();
  ASSERT_NE(std::next(copy), ops.end()) << traced.str();
  EXPECT_EQ(*std::next(copy), "reshape") << traced.str();
  EXPECT_TRUE(all_close(graph::run(traced, {x})[0].to_local(),
                        x.to_local().permute({0, 2, 1}).reshape({4, 6}) * 2.0));
}

#ifdef TESSERA_RUN_PATH
struct Job {
  int status;
  std::string output;
};

Job run_workers(int ranks, const std::string& mode, const std::string& env = "") {
  const std::filesystem::path log = std::filesystem::temp_directory_path() /
                                    ("tessera_global_" + std::to_string(::getpid()) + ".log");
  const std::string command = env + " " + std::string(TESSERA_RUN_PATH) + " -n " +
                              std::to_string(ranks) + " --timeout 60 " + TESSERA_GLOBAL_WORKER +
                              " " + mode + " > " + log.string() + " 2>&1";
  const int raw = std::system(command.c_str());
  std::ifstream file(log);
  std::stringstream text;
  text << file.rdbuf();
  std::filesystem::remove(log);
  return {WIFEXITED(raw) ? WEXITSTATUS(raw) : -1, text.str()};
}

class GlobalJobTest : public ::testing::TestWithParam<int> {};

TEST_P(GlobalJobTest, EveryBoxingConversionMatchesTheReference) {
  Job job = run_workers(GetParam(), "boxing");
  EXPECT_EQ(job.status, 0) << job.output;
  EXPECT_HAS(job.output, "checks passed");
}

TEST_P(GlobalJobTest, EveryOpInEverySignatureMatchesOneProcess) {
  Job job = run_workers(GetParam(), "ops");
  EXPECT_EQ(job.status, 0) << job.output;
}

TEST_P(GlobalJobTest, GradientsFlowThroughGlobalOps) {
  Job job = run_workers(GetParam(), "autograd");
  EXPECT_EQ(job.status, 0) << job.output;
}

TEST_P(GlobalJobTest, CollectiveOpsGiveTheirValuesAndPassGradientChecksAcrossProcesses) {
  Job job = run_workers(GetParam(), "collective_grads");
  EXPECT_EQ(job.status, 0) << job.output;
  EXPECT_HAS(job.output, "collective_grads:");
}

TEST_P(GlobalJobTest, ParallelTrainingTracksOneProcess) {
  // MLP and GPT under data, tensor (and on 4 ranks 2-D) parallelism: the
  // loss of every one of 20 steps within 1e-4 (relative) of one process.
  Job job = run_workers(GetParam(), "train");
  EXPECT_EQ(job.status, 0) << job.output;
  EXPECT_HAS(job.output, "GPT tensor parallel");
}

TEST_P(GlobalJobTest, AutoParallelTrainingTracksOneProcess) {
  // The planner's layouts for the MLP (also in 0.7x data parallel's
  // memory) and the GPT, on [n] (and [2, 2] for 4 ranks): every step's
  // loss within 1e-4 (relative) of one process.
  Job job = run_workers(GetParam(), "auto");
  EXPECT_EQ(job.status, 0) << job.output;
  EXPECT_HAS(job.output, "GPT auto-parallel");
  EXPECT_HAS(job.output, "GPT graph::compile auto_parallel");
  EXPECT_HAS(job.output, "Predicted step per rank");
}

TEST_P(GlobalJobTest, CompiledTrainingEqualsEagerGlobal) {
  // MLP and GPT (with dropout) under data, tensor (and on 4 ranks 2-D)
  // parallelism, each step compiled: the losses and parameters of eager
  // global training, bit for bit.
  Job job = run_workers(GetParam(), "compile");
  EXPECT_EQ(job.status, 0) << job.output;
  EXPECT_HAS(job.output, "GPT tensor parallel on");
}

TEST_P(GlobalJobTest, BatchNormGlobalStatisticsEqualOneProcessPerRankEqualDdp) {
  Job job = run_workers(GetParam(), "batch_norm");
  EXPECT_EQ(job.status, 0) << job.output;
  EXPECT_HAS(job.output, "batch norm checks passed");
}

TEST(GlobalOverlapTest, GradientsReducedOnTheCommunicationThreadTrackToo) {
  Job job = run_workers(2, "train", "TESSERA_OVERLAP_GRADIENTS=1");
  EXPECT_EQ(job.status, 0) << job.output;
  EXPECT_HAS(job.output, "GPT data parallel");
}

TEST_P(GlobalJobTest, DebugModeNamesTheRankThatIssuedAnotherOp) {
  Job job = run_workers(GetParam(), "diverge", "TESSERA_DEBUG_SPMD=1");
  EXPECT_NE(job.status, 0) << job.output;
  EXPECT_HAS(job.output, "[spmd] ranks diverged");
  EXPECT_HAS(job.output, "rank " + std::to_string(GetParam() - 1) + " issued #");
  EXPECT_HAS(job.output, "barrier() in mul(");
}

TEST_P(GlobalJobTest, DebugModeSeesACollectiveThatItemIssuesOnOneRank) {
  // Only rank 0 calls loss.item(); the others go on to the next op. Without
  // the check at the group, both sides waited for the full timeout.
  Job job = run_workers(GetParam(), "item_alone", "TESSERA_DEBUG_SPMD=1");
  EXPECT_NE(job.status, 0) << job.output;
  EXPECT_HAS(job.output, "[spmd] ranks diverged");
  EXPECT_HAS(job.output, "all_reduce(");
  EXPECT_HAS(job.output, "barrier() in add(");
}

TEST_P(GlobalJobTest, MisuseGivesClearErrors) {
  Job job = run_workers(GetParam(), "errors");
  EXPECT_EQ(job.status, 0) << job.output;
}

TEST(GlobalCheckpointTest, SavedOnFourTensorParallelLoadsOnTwoDataParallelAndOne) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("tessera_sharded_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  Job saved = run_workers(4, "ckpt_save " + dir.string());
  ASSERT_EQ(saved.status, 0) << saved.output;
  EXPECT_TRUE(std::filesystem::exists(dir / "index.json"));
  bool has_rank_3_shard = false;
  for (const auto& item : std::filesystem::directory_iterator(dir)) {
    has_rank_3_shard =
        has_rank_3_shard || item.path().filename().string().rfind("shard-3-", 0) == 0;
  }
  EXPECT_TRUE(has_rank_3_shard);
  for (int ranks : {2, 1}) {
    Job loaded = run_workers(ranks, "ckpt_load " + dir.string());
    EXPECT_EQ(loaded.status, 0) << ranks << " ranks: " << loaded.output;
  }
  // A corrupt index is an error, not a crash.
  { std::ofstream(dir / "index.json") << "{ not json"; }
  Job corrupt = run_workers(1, "ckpt_load " + dir.string());
  EXPECT_NE(corrupt.status, 0);
  EXPECT_HAS(corrupt.output, "not valid JSON");
  std::filesystem::remove_all(dir);
}

#ifdef TESSERA_GLOBAL_TOUR
TEST(GlobalTourTest, TheTutorialProgramRunsOnFourRanks) {
  const std::filesystem::path log = std::filesystem::temp_directory_path() /
                                    ("tessera_tour_" + std::to_string(::getpid()) + ".log");
  const std::string command = std::string(TESSERA_RUN_PATH) + " -n 4 --timeout 60 " +
                              TESSERA_GLOBAL_TOUR + " > " + log.string() + " 2>&1";
  const int raw = std::system(command.c_str());
  std::ifstream file(log);
  std::stringstream text;
  text << file.rdbuf();
  std::filesystem::remove(log);
  EXPECT_TRUE(WIFEXITED(raw) && WEXITSTATUS(raw) == 0) << text.str();
  EXPECT_HAS(text.str(), "all checks passed");
}
#endif

INSTANTIATE_TEST_SUITE_P(Ranks, GlobalJobTest, ::testing::Values(2, 3, 4));
#endif

}  // namespace
}  // namespace tessera::testing
