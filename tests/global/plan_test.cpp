// Layout decisions as plans: plan_boxing for every pair of the boxing table
// and the generic route, choose_layout's chosen signature, cost and
// runner-up, and the cost model. All metadata: no process group is needed,
// so the meshes here are ones this process does not have.

#include <numeric>

#include "tessera/global/choose_layout.h"
#include "tessera/global/layout.h"
#include "testing.h"

namespace tessera::testing {
namespace {

using global::BoxingPlan;
using global::BoxingRoute;
using global::Collective;
using global::CostModel;

const Placement kFour(DeviceType::cpu, {0, 1, 2, 3});
const Placement kTwoByTwo(DeviceType::cpu, {0, 1, 2, 3}, {2, 2});
const Sbp kB = Sbp::broadcast();
const Sbp kP = Sbp::partial_sum();
const Sbp kS0 = Sbp::split(0);
const Sbp kS1 = Sbp::split(1);

TensorMeta global_meta(const Shape& shape, const Placement& placement, const NdSbp& sbp) {
  return {shape, DType::f32, Device{}, placement, sbp};
}

// The defaults: α = 50 us, β = 1 ns/B per link, 20 GB/s memory.
constexpr double kAlpha = 50e-6;
constexpr double kBeta = 1e-9;
double copy_time(double bytes) {
  return 2 * bytes / 20e9;
}

// One step of a plan, checked field by field.
void expect_step(const BoxingPlan& plan, BoxingRoute route, std::optional<Collective> collective,
                 double payload, double link, double local) {
  ASSERT_EQ(plan.steps.size(), 1u) << plan.explain();
  const global::BoxingStep& step = plan.steps[0];
  EXPECT_EQ(step.route, route) << plan.explain();
  EXPECT_EQ(step.collective, collective) << plan.explain();
  EXPECT_DOUBLE_EQ(step.payload_bytes, payload) << plan.explain();
  EXPECT_DOUBLE_EQ(step.link_bytes, link) << plan.explain();
  EXPECT_DOUBLE_EQ(step.local_bytes, local) << plan.explain();
  const double expected = (collective ? kAlpha + link * kBeta : 0) + copy_time(local);
  EXPECT_NEAR(plan.seconds, expected, 1e-15) << plan.explain();
}

// [8, 6] f32 on four ranks: 192 bytes; a row split holds 48.
TEST(PlanBoxing, EveryPairOfTheBoxingTable) {
  const Shape shape{8, 6};
  auto plan = [&](const Sbp& from, const Sbp& to) {
    return global::plan_boxing(global_meta(shape, kFour, from), kFour, to);
  };
  EXPECT_TRUE(plan(kS0, kS0).steps.empty());
  EXPECT_EQ(plan(kS0, kS0).seconds, 0);
  // Ring all-reduce: 2T(n-1)/n on the busiest link.
  expect_step(plan(kP, kB), BoxingRoute::all_reduce, Collective::all_reduce, 192, 288, 0);
  // Rows split evenly: a reduce-scatter, T(n-1)/n.
  expect_step(plan(kP, kS0), BoxingRoute::reduce_scatter, Collective::reduce_scatter, 192, 144, 0);
  // 6 columns over 4 ranks do not split evenly: all-reduce, then each keeps its slice.
  expect_step(plan(kP, kS1), BoxingRoute::all_reduce_then_slice, Collective::all_reduce, 192, 288,
              0);
  // Each rank sends its 48 bytes to the three others.
  expect_step(plan(kS0, kB), BoxingRoute::all_gather, Collective::all_gather, 48, 144, 0);
  // Columns 2, 2, 1, 1: rank 2 keeps 2x1 of its 2x6 rows and sends 40 bytes.
  expect_step(plan(kS0, kS1), BoxingRoute::all_to_all, Collective::all_to_all, 48, 40, 0);
  expect_step(plan(kB, kS0), BoxingRoute::local_slice, std::nullopt, 0, 0, 48);
  expect_step(plan(kB, kP), BoxingRoute::keep_on_first, std::nullopt, 0, 0, 192);
  expect_step(plan(kS0, kP), BoxingRoute::into_zeros, std::nullopt, 0, 0, 192);
  expect_step(plan(kS0, Sbp::partial_max()), BoxingRoute::all_gather, Collective::all_gather, 48,
              144, 0);
  // Another partial kind: reduce first, then keep as from broadcast.
  BoxingPlan mixed = plan(Sbp::partial_max(), kP);
  ASSERT_EQ(mixed.steps.size(), 2u) << mixed.explain();
  EXPECT_EQ(mixed.steps[0].route, BoxingRoute::all_reduce);
  EXPECT_EQ(mixed.steps[0].to, NdSbp(kB));
  EXPECT_EQ(mixed.steps[1].route, BoxingRoute::keep_on_first);
}

TEST(PlanBoxing, UnevenSplitsCountTheBusiestRank) {
  // 7 rows over 4 ranks: 2, 2, 2, 1 rows of 6 floats.
  const TensorMeta rows = global_meta({7, 6}, kFour, kS0);
  expect_step(global::plan_boxing(rows, kFour, kB), BoxingRoute::all_gather, Collective::all_gather,
              48, 168 - 24, 0);
  expect_step(global::plan_boxing(global_meta({7, 6}, kFour, kP), kFour, kS0),
              BoxingRoute::all_reduce_then_slice, Collective::all_reduce, 168, 252, 0);
}

TEST(PlanBoxing, TwoDimensionalMeshesConvertOneAxisAtATime) {
  // (S(0), S(1)) -> (B, B): the inner axis first, on groups of two.
  BoxingPlan plan = global::plan_boxing(global_meta({8, 6}, kTwoByTwo, NdSbp({kS0, kS1})),
                                        kTwoByTwo, NdSbp({kB, kB}));
  ASSERT_EQ(plan.steps.size(), 2u) << plan.explain();
  EXPECT_EQ(plan.steps[0].axis, 1);
  EXPECT_EQ(plan.steps[0].route, BoxingRoute::all_gather);
  EXPECT_EQ(plan.steps[0].group_size, 2);
  EXPECT_DOUBLE_EQ(plan.steps[0].payload_bytes, 4 * 3 * 4);  // a [4, 3] block
  EXPECT_EQ(plan.steps[0].to, NdSbp({kS0, kB}));
  EXPECT_EQ(plan.steps[1].axis, 0);
  EXPECT_DOUBLE_EQ(plan.steps[1].payload_bytes, 4 * 6 * 4);  // then [4, 6] rows
  // Both axes split dim 0: converting the outer one alone is not exact.
  BoxingPlan nested = global::plan_boxing(global_meta({8, 6}, kTwoByTwo, NdSbp({kS0, kS0})),
                                          kTwoByTwo, NdSbp({kS1, kS0}));
  ASSERT_EQ(nested.steps.size(), 1u) << nested.explain();
  EXPECT_EQ(nested.steps[0].route, BoxingRoute::slice_intersections);
}

TEST(PlanBoxing, OtherPlacementsSendSliceIntersections) {
  const Placement first(DeviceType::cpu, {0, 1}), second(DeviceType::cpu, {2, 3});
  // Rows 0-3 go from rank 0 to rank 2, rows 4-7 from rank 1 to rank 3.
  BoxingPlan plan = global::plan_boxing(global_meta({8, 6}, first, kS0), second, kS0);
  expect_step(plan, BoxingRoute::slice_intersections, Collective::all_to_all, 96, 96, 96);
  EXPECT_EQ(plan.steps[0].group_size, 4);
  // Onto an overlapping placement a rank keeps what it already holds.
  const Placement shifted(DeviceType::cpu, {1, 2});
  BoxingPlan overlap = global::plan_boxing(global_meta({8, 6}, first, kB), shifted, kB);
  ASSERT_EQ(overlap.steps.size(), 1u);
  // Rank 1 keeps its copy and also serves rank 2 (a target outside the
  // source placement takes a replica by its index).
  EXPECT_DOUBLE_EQ(overlap.steps[0].payload_bytes, 384);
  EXPECT_DOUBLE_EQ(overlap.steps[0].link_bytes, 192);
  EXPECT_HAS(overlap.explain(), "slice intersections");
}

// The generic route is priced by its busiest link, and a rank that
// gathers what others hold receives far more than it holds. Beyond 64
// ranks the route is estimated rather than enumerated; the estimate must
// count that too. [32, 8, 4] f32 on [32, 4]: from (S(0), S(1)) a rank
// holds one sample's 2 of 8 rows (32 B); under (B, S(0)) it wants the 8
// samples of its axis-1 coordinate whole (1024 B). Rank (16, 0) holds
// none of those, so it receives all 1024 B.
TEST(PlanBoxing, TheGenericRouteCountsWhatTheBusiestRankReceives) {
  std::vector<int> ranks(128);
  std::iota(ranks.begin(), ranks.end(), 0);
  const Placement mesh(DeviceType::cpu, ranks, {32, 4});
  BoxingPlan plan =
      global::plan_boxing(global_meta({32, 8, 4}, mesh, NdSbp({kS0, kS1})), mesh, NdSbp({kB, kS0}));
  ASSERT_EQ(plan.steps.size(), 1u) << plan.explain();
  EXPECT_EQ(plan.steps[0].route, BoxingRoute::slice_intersections) << plan.explain();
  EXPECT_DOUBLE_EQ(plan.steps[0].payload_bytes, 32) << plan.explain();
  EXPECT_DOUBLE_EQ(plan.steps[0].link_bytes, 1024) << plan.explain();
  EXPECT_DOUBLE_EQ(plan.steps[0].local_bytes, 1024) << plan.explain();
  // Enumerated (few ranks): four ranks' row blocks gathered onto a fifth.
  // Each sends its 48 B; the fifth receives all 192 B.
  const Placement fifth(DeviceType::cpu, {4});
  BoxingPlan gathered = global::plan_boxing(global_meta({8, 6}, kFour, kS0), fifth, kB);
  expect_step(gathered, BoxingRoute::slice_intersections, Collective::all_to_all, 48, 192, 192);
}

TEST(PlanBoxing, ExplainNamesEveryStep) {
  BoxingPlan plan = global::plan_boxing(global_meta({8, 6}, kFour, kP), kFour, kB);
  EXPECT_HAS(plan.explain(), "all-reduce on mesh axis 0 (groups of 4)");
  EXPECT_HAS(plan.explain(), "192 B in, 288 B sent per rank");
}

// matmul of [8, 6] rows split over four ranks by a broadcast [6, 4].
TEST(ChooseLayout, MatmulKeepsRowSplitsAndNamesTheRunnerUp) {
  const OpDef& matmul_op = find_op("matmul");
  global::LayoutDecision decision = global::choose_layout(
      matmul_op, {global_meta({8, 6}, kFour, kS0), global_meta({6, 4}, kFour, kB)}, {});
  EXPECT_EQ(decision.input_sbps, (std::vector<NdSbp>{kS0, kB})) << decision.explain();
  EXPECT_EQ(decision.output_sbps, (std::vector<NdSbp>{kS0}));
  EXPECT_EQ(decision.outputs[0].shape, (Shape{8, 4}));
  EXPECT_EQ(decision.communication_seconds, 0);
  // Roofline of a [2, 6] x [6, 4] shard: 48 + 96 + 32 bytes at 20 GB/s.
  EXPECT_NEAR(decision.compute_seconds, 176 / 20e9, 1e-15);
  // Next best: write the rows into zeros (a partial sum), multiply whole.
  ASSERT_TRUE(decision.runner_up) << decision.explain();
  EXPECT_EQ(decision.runner_up->input_sbps, (std::vector<NdSbp>{kP, kB})) << decision.explain();
  EXPECT_EQ(decision.runner_up->output_sbps, (std::vector<NdSbp>{kP}));
  EXPECT_NEAR(decision.runner_up->communication_seconds, copy_time(192), 1e-15);
  EXPECT_GT(decision.runner_up->seconds(), decision.seconds());
  EXPECT_HAS(decision.explain(), "runner-up");
}

TEST(ChooseLayout, MatmulOfInnerSplitsIsAPartialSum) {
  global::LayoutDecision decision = global::choose_layout(
      find_op("matmul"), {global_meta({8, 6}, kFour, kS1), global_meta({6, 4}, kFour, kS0)}, {});
  EXPECT_EQ(decision.output_sbps, (std::vector<NdSbp>{kP})) << decision.explain();
  EXPECT_EQ(decision.communication_seconds, 0);
}

TEST(ChooseLayout, ElementwiseSlicesTheBroadcastOperand) {
  global::LayoutDecision decision = global::choose_layout(
      find_op("add"), {global_meta({8, 6}, kFour, kS0), global_meta({8, 6}, kFour, kB)}, {});
  EXPECT_EQ(decision.input_sbps, (std::vector<NdSbp>{kS0, kS0})) << decision.explain();
  EXPECT_EQ(decision.output_sbps, (std::vector<NdSbp>{kS0}));
  // b keeps its [2, 6] rows: a local slice, no communication.
  EXPECT_NEAR(decision.communication_seconds, copy_time(48), 1e-15);
  ASSERT_EQ(decision.boxing[1].steps.size(), 1u);
  EXPECT_EQ(decision.boxing[1].steps[0].route, BoxingRoute::local_slice);
  EXPECT_TRUE(decision.boxing[0].steps.empty());
}

TEST(ChooseLayout, InPlaceOpsKeepTheLayoutTheyWrite) {
  // A row-split parameter updated from a broadcast gradient: the parameter
  // and its momentum stay put, and the gradient is sliced to their rows.
  const Attrs attrs{{"lr", 0.1},           {"momentum", 0.9},   {"dampening", 0.0},
                    {"weight_decay", 0.0}, {"nesterov", false}, {"first_step", true}};
  global::LayoutDecision decision =
      global::choose_layout(find_op("sgd_momentum_step"),
                            {global_meta({8, 6}, kFour, kS0), global_meta({8, 6}, kFour, kB),
                             global_meta({8, 6}, kFour, kS0)},
                            attrs);
  EXPECT_EQ(decision.input_sbps, (std::vector<NdSbp>{kS0, kS0, kS0})) << decision.explain();
  EXPECT_EQ(decision.output_sbps, (std::vector<NdSbp>{kS0, kS0}));
  EXPECT_TRUE(decision.boxing[0].steps.empty());
  EXPECT_TRUE(decision.boxing[2].steps.empty());
  ASSERT_EQ(decision.boxing[1].steps.size(), 1u);
  EXPECT_EQ(decision.boxing[1].steps[0].route, BoxingRoute::local_slice);
  // Adam is not linear: a partial parameter has no signature that keeps it.
  EXPECT_HAS(error_of([&] {
               global::choose_layout(
                   find_op("adam_step"),
                   {global_meta({8, 6}, kFour, kP), global_meta({8, 6}, kFour, kP),
                    global_meta({8, 6}, kFour, kP), global_meta({8, 6}, kFour, kP)},
                   {});
             }),
             "none of its SBP signatures keeps the layout");
  // copy_ is linear: a partial destination takes the source as a partial sum.
  global::LayoutDecision copy = global::choose_layout(
      find_op("copy_"), {global_meta({8, 6}, kFour, kP), global_meta({6}, kFour, kB)}, {});
  EXPECT_EQ(copy.input_sbps, (std::vector<NdSbp>{kP, kP})) << copy.explain();
  EXPECT_EQ(copy.output_sbps, (std::vector<NdSbp>{kP}));
}

TEST(ChooseLayout, ReducingASplitDimGivesAPartialSum) {
  global::LayoutDecision decision =
      global::choose_layout(find_op("sum"), {global_meta({8, 6}, kFour, kS0)},
                            Attrs{{"dims", std::vector<int64_t>{0}}, {"keepdim", false}});
  EXPECT_EQ(decision.output_sbps, (std::vector<NdSbp>{kP})) << decision.explain();
  EXPECT_EQ(decision.outputs[0].shape, (Shape{6}));
  // Over the other dim, the rows stay split.
  global::LayoutDecision rows =
      global::choose_layout(find_op("sum"), {global_meta({8, 6}, kFour, kS0)},
                            Attrs{{"dims", std::vector<int64_t>{1}}, {"keepdim", false}});
  EXPECT_EQ(rows.output_sbps, (std::vector<NdSbp>{kS0})) << rows.explain();
}

TEST(ChooseLayout, UnevenSplitsAreKept) {
  global::LayoutDecision decision = global::choose_layout(
      find_op("matmul"), {global_meta({7, 6}, kFour, kS0), global_meta({6, 4}, kFour, kB)}, {});
  EXPECT_EQ(decision.output_sbps, (std::vector<NdSbp>{kS0})) << decision.explain();
  EXPECT_EQ(decision.communication_seconds, 0);
  // The largest shard (2 rows) prices the compute: 48 + 96 + 32 bytes.
  EXPECT_NEAR(decision.compute_seconds, 176 / 20e9, 1e-15);
}

TEST(ChooseLayout, TwoDimensionalMeshes) {
  // Rows split on axis 0, the inner dim on axis 1: the weight's rows are
  // sliced on axis 1 and the product is split rows of partial sums.
  global::LayoutDecision decision =
      global::choose_layout(find_op("matmul"),
                            {global_meta({8, 6}, kTwoByTwo, NdSbp({kS0, kS1})),
                             global_meta({6, 4}, kTwoByTwo, NdSbp({kB, kB}))},
                            {});
  EXPECT_EQ(decision.input_sbps, (std::vector<NdSbp>{NdSbp({kS0, kS1}), NdSbp({kB, kS0})}))
      << decision.explain();
  EXPECT_EQ(decision.output_sbps, (std::vector<NdSbp>{NdSbp({kS0, kP})}));
  // The weight keeps a [3, 4] slice of its rows.
  EXPECT_NEAR(decision.communication_seconds, copy_time(48), 1e-15);
}

TEST(ChooseLayout, SignaturesThatDoNotHoldAreExplained) {
  // [5, 3] -> [15] keeps S(0) only when rows split as the elements do: on
  // two ranks the rows give 9 and 6 elements, the output's split 8 and 7.
  const Placement two(DeviceType::cpu, {0, 1});
  global::LayoutDecision decision =
      global::choose_layout(find_op("reshape"), {global_meta({5, 3}, two, kS0)},
                            Attrs{{"shape", std::vector<int64_t>{15}}});
  // What remains cheapest: each rank writes its rows into zeros (P).
  EXPECT_EQ(decision.output_sbps, (std::vector<NdSbp>{kP})) << decision.explain();
  ASSERT_FALSE(decision.rejected.empty());
  EXPECT_HAS(decision.explain(), "would be [9], not [8]");
}

TEST(ChooseLayout, AReshapeDividingASplitDimKeepsTheSplit) {
  // [8 * 3, 5] -> [8, 3, 5] split by rows on four ranks: each holds 6 rows,
  // two whole groups of 3, so the output is split by its first dim.
  const Attrs divide{{"shape", std::vector<int64_t>{8, 3, 5}}};
  global::LayoutDecision decision =
      global::choose_layout(find_op("reshape"), {global_meta({24, 5}, kFour, kS0)}, divide);
  EXPECT_EQ(decision.output_sbps, (std::vector<NdSbp>{kS0})) << decision.explain();
  EXPECT_EQ(decision.communication_seconds, 0) << decision.explain();
  // [2 * 3, 5] -> [2, 3, 5] on four ranks: rows split 2, 2, 1, 1, which are
  // not whole groups of 3, so the split does not hold.
  const Attrs small{{"shape", std::vector<int64_t>{2, 3, 5}}};
  global::LayoutDecision refused =
      global::choose_layout(find_op("reshape"), {global_meta({6, 5}, kFour, kS0)}, small);
  EXPECT_NE(refused.output_sbps, (std::vector<NdSbp>{kS0})) << refused.explain();
  EXPECT_HAS(refused.explain(), "not [1, 3, 5]");
}

TEST(ChooseLayout, FullReductionsOfSplitsArePartialSums) {
  // A loss's final sum over split rows: each rank sums its own rows.
  global::LayoutDecision decision =
      global::choose_layout(find_op("sum"), {global_meta({8, 6}, kFour, kS0)},
                            Attrs{{"dims", std::vector<int64_t>{0, 1}}, {"keepdim", false}});
  EXPECT_EQ(decision.output_sbps, (std::vector<NdSbp>{kP})) << decision.explain();
  EXPECT_EQ(decision.outputs[0].shape, (Shape{}));
}

TEST(ChooseLayout, InputsOnTwoPlacementsAreRefused) {
  const Placement two(DeviceType::cpu, {0, 1});
  EXPECT_HAS(error_of([&] {
               global::choose_layout(
                   find_op("add"), {global_meta({4}, two, kS0), global_meta({4}, kFour, kS0)}, {});
             }),
             "must share one placement");
}

TEST(CostModel, LinksUseTheNearestMeasuredGroupSize) {
  CostModel model;
  EXPECT_EQ(model.link(8).alpha_seconds, kAlpha);
  model.set_link(2, {10e-6, 2e-9});
  model.set_link(8, {40e-6, 4e-9});
  EXPECT_EQ(model.link(2).alpha_seconds, 10e-6);
  EXPECT_EQ(model.link(3).alpha_seconds, 10e-6);
  EXPECT_EQ(model.link(6).alpha_seconds, 40e-6);
  EXPECT_EQ(model.link(64).alpha_seconds, 40e-6);
  // all-gather of 100 bytes on 4 ranks: 300 bytes arrive from the others.
  EXPECT_DOUBLE_EQ(CostModel::link_bytes(Collective::all_gather, 100, 4), 300);
  EXPECT_DOUBLE_EQ(CostModel::link_bytes(Collective::all_reduce, 100, 4), 150);
  EXPECT_DOUBLE_EQ(CostModel::link_bytes(Collective::reduce_scatter, 100, 4), 75);
  EXPECT_EQ(model.collective_seconds(Collective::all_reduce, 100, 1), 0);
  EXPECT_DOUBLE_EQ(model.compute_seconds({2e9, 1e6}), 2e9 / 100e9);  // compute-bound
}

// A collective uses its own kind's fits where a profile has them (a gather
// may take another transport than an all-reduce), else the fits for all.
TEST(CostModel, CollectivesUseTheirOwnFitsWhereTheProfileHasThem) {
  CostModel model = CostModel::from_json(
      R"({"links": [{"group_size": 2, "alpha_seconds": 1e-5, "seconds_per_byte": 1e-9},
                    {"group_size": 2, "collective": "all_gather", "alpha_seconds": 3e-4,
                     "seconds_per_byte": 2e-9},
                    {"group_size": 8, "collective": "all_gather", "alpha_seconds": 5e-4,
                     "seconds_per_byte": 4e-9}]})");
  // 1000 bytes gathered on 2 ranks: 1000 bytes cross the busiest link.
  EXPECT_DOUBLE_EQ(model.collective_seconds(Collective::all_gather, 1000, 2), 3e-4 + 1000 * 2e-9);
  // An all-reduce of 1000 bytes on 2 ranks: 1000 link bytes at the general rate.
  EXPECT_DOUBLE_EQ(model.collective_seconds(Collective::all_reduce, 1000, 2), 1e-5 + 1000 * 1e-9);
  // The nearest group size among the kind's own fits.
  EXPECT_EQ(model.link(6, 0, Collective::all_gather).alpha_seconds, 5e-4);
  EXPECT_EQ(model.link(6, 0, Collective::reduce_scatter).alpha_seconds, 1e-5);
  // Boxing prices its gather with the gather's fit (for 4 ranks, the
  // nearer one of 2): S(0) -> B of 8 x 6 f32 on 4 ranks brings each rank
  // the other three's 48 bytes.
  BoxingPlan plan = global::plan_boxing(global_meta({8, 6}, kFour, kS0), kFour, kB, model);
  ASSERT_EQ(plan.steps.size(), 1u);
  EXPECT_NEAR(plan.seconds, 3e-4 + 144 * 2e-9 + model.copy_seconds(plan.steps[0].local_bytes),
              1e-12);
  // Written back with the kind, read the same.
  EXPECT_EQ(CostModel::from_json(model.to_json()).to_json(), model.to_json());
  EXPECT_HAS(error_of([] {
               CostModel::from_json(R"({"links": [{"group_size": 2, "collective": "allgather",
                                       "alpha_seconds": 1e-5, "seconds_per_byte": 1e-9}]})");
             }),
             "'collective' must be one of \"all_reduce\"");
}

TEST(CostModel, ReadsAProfileAndRefusesBadOnes) {
  CostModel model = CostModel::from_json(
      R"({"links": [{"group_size": 4, "alpha_seconds": 2e-5, "seconds_per_byte": 5e-10}],
          "compute": {"flops_per_second": 3e11, "bytes_per_second": 4e10}})");
  EXPECT_EQ(model.link(4).alpha_seconds, 2e-5);
  EXPECT_EQ(model.compute().flops_per_second, 3e11);
  // The plan prices with the profile it is given.
  BoxingPlan plan = global::plan_boxing(global_meta({8, 6}, kFour, kP), kFour, kB, model);
  EXPECT_NEAR(plan.seconds, 2e-5 + 288 * 5e-10, 1e-15);
  EXPECT_HAS(error_of([] { CostModel::from_json("[1, 2]"); }), "not a JSON object");
  EXPECT_HAS(error_of([] { CostModel::from_json(R"({"links": [{"group_size": 4}]})"); }),
             "alpha_seconds");
  EXPECT_HAS(error_of([] {
               CostModel::from_json(
                   R"({"links": [{"group_size": 1, "alpha_seconds": 0, "seconds_per_byte": 0}]})");
             }),
             "group_size must be an integer >= 2");
  EXPECT_HAS(
      error_of([] {
        CostModel::from_json(R"({"compute": {"flops_per_second": -1, "bytes_per_second": 1}})");
      }),
      "not negative");
}

TEST(OpDefs, KindsAndCosts) {
  EXPECT_EQ(find_op("add").kind, OpKind::elementwise);
  EXPECT_EQ(find_op("exp").kind, OpKind::elementwise);
  EXPECT_EQ(find_op("reshape").kind, OpKind::view);
  EXPECT_EQ(find_op("sum").kind, OpKind::reduction);
  EXPECT_EQ(find_op("matmul").kind, OpKind::matmul);
  EXPECT_EQ(find_op("softmax").kind, OpKind::normalization);
  EXPECT_EQ(find_op("rand").kind, OpKind::random);
  const TensorMeta a{{8, 6}, DType::f32, Device{}}, b{{6, 4}, DType::f32, Device{}};
  const TensorMeta out{{8, 4}, DType::f32, Device{}};
  OpCost product = op_cost(find_op("matmul"), {a, b}, {out}, {});
  EXPECT_EQ(product.flops, 2.0 * 8 * 4 * 6);
  EXPECT_EQ(product.bytes, (48 + 24 + 32) * 4.0);
  OpCost sum = op_cost(find_op("add"), {a, a}, {a}, {});
  EXPECT_EQ(sum.flops, 48);
  EXPECT_EQ(sum.bytes, 3 * 48 * 4.0);
  EXPECT_EQ(op_cost(find_op("reshape"), {a}, {a}, {}).bytes, 0);
}

TEST(Attrs, EqualityIgnoresOrderAndHashAgrees) {
  Attrs a{{"dims", std::vector<int64_t>{0, 1}}, {"keepdim", true}, {"eps", 1e-5}};
  Attrs b{{"keepdim", true}, {"eps", 1e-5}, {"dims", std::vector<int64_t>{0, 1}}};
  EXPECT_EQ(a, b);
  EXPECT_EQ(a.hash(), b.hash());
  EXPECT_EQ(std::hash<Attrs>()(a), a.hash());
  EXPECT_NE(a, (Attrs{{"dims", std::vector<int64_t>{1, 0}}, {"keepdim", true}, {"eps", 1e-5}}));
  EXPECT_NE(a, (Attrs{{"dims", std::vector<int64_t>{0, 1}}, {"keepdim", true}}));
  // A value of another type is another attribute.
  EXPECT_NE(Attrs({{"n", int64_t{1}}}), Attrs({{"n", 1.0}}));
  EXPECT_NE(Attrs({{"n", int64_t{1}}}).hash(), Attrs({{"n", 1.0}}).hash());
  // Bitwise doubles: NaN equals itself; -0.0 and 0.0 differ.
  const double nan = std::numeric_limits<double>::quiet_NaN();
  EXPECT_EQ(Attrs({{"x", nan}}), Attrs({{"x", nan}}));
  EXPECT_NE(Attrs({{"x", 0.0}}), Attrs({{"x", -0.0}}));
  EXPECT_EQ(Attrs(), Attrs());
}

// The general boxing route's pieces, joined with cat under a trace: the
// intersections of a 2 x 2 and a 1 x 3 grid of a [4, 6] tensor, in any order.
TEST(AssemblePieces, JoinsTheIntersectionsOfTwoShardingsWithCat) {
  std::vector<double> values(24);
  for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<double>(i);
  const Tensor whole = make(values, {4, 6});
  auto piece = [&](int64_t r0, int64_t rows, int64_t c0, int64_t cols) {
    return global::PlacedPiece{{r0, c0}, whole.narrow(0, r0, rows).narrow(1, c0, cols)};
  };
  // Rows split at 1, columns at 2, 3 and 4.
  std::vector<global::PlacedPiece> pieces{piece(1, 3, 4, 2), piece(0, 1, 0, 2), piece(1, 3, 2, 1),
                                          piece(0, 1, 4, 2), piece(1, 3, 0, 2), piece(0, 1, 2, 1),
                                          piece(0, 1, 3, 1), piece(1, 3, 3, 1)};
  EXPECT_TRUE(all_close(global::assemble_pieces(pieces, {4, 6}, DType::f64), values, 0, 0));
  // A region no piece covers, or two pieces on one place, is an internal error.
  pieces.pop_back();
  EXPECT_HAS(error_of([&] {
               (void)global::assemble_pieces(pieces, {4, 6}, DType::f64);
             }),
             "[assemble_pieces] internal error");
  pieces.push_back(piece(1, 3, 2, 2));
  EXPECT_HAS(error_of([&] {
               (void)global::assemble_pieces(pieces, {4, 6}, DType::f64);
             }),
             "[assemble_pieces] internal error");
  // No pieces: an empty shard, zeros of its shape.
  EXPECT_EQ(global::assemble_pieces({}, {0, 6}, DType::f32).shape(), (Shape{0, 6}));
}

}  // namespace
}  // namespace tessera::testing
