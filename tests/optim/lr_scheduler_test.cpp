#include <unistd.h>

#include <cmath>
#include <cstdio>

#include "testing.h"

namespace tessera::testing {
namespace {

// Learning rates of group 0 over `epochs` epochs, starting from lr 1.
template <typename MakeScheduler>
std::vector<double> lrs_over(MakeScheduler make_scheduler, int epochs) {
  Tensor p = zeros({1}).set_requires_grad();
  optim::SGD sgd({p}, {.lr = 1.0});
  auto scheduler = make_scheduler(sgd);
  std::vector<double> lrs;
  for (int epoch = 0; epoch < epochs; ++epoch) {
    lrs.push_back(sgd.lr());
    scheduler.step();
  }
  return lrs;
}

void expect_near(const std::vector<double>& actual, const std::vector<double>& expected) {
  ASSERT_EQ(actual.size(), expected.size());
  for (size_t i = 0; i < actual.size(); ++i) EXPECT_NEAR(actual[i], expected[i], 1e-12) << i;
}

// Values printed by torch.optim.lr_scheduler (PyTorch 1.13) with lr=1.
TEST(LRScheduler, MatchesPyTorchsSchedules) {
  expect_near(lrs_over([](optim::SGD& o) { return optim::MultiStepLR(o, {2, 4}, 0.5); }, 6),
              {1.0, 1.0, 0.5, 0.5, 0.25, 0.25});
  expect_near(lrs_over([](optim::SGD& o) { return optim::ExponentialLR(o, 0.9); }, 4),
              {1.0, 0.9, 0.81, 0.729});
  expect_near(lrs_over([](optim::SGD& o) { return optim::LinearLR(o, 0.25, 1.0, 3); }, 5),
              {0.25, 0.5, 0.75, 1.0, 1.0});
  expect_near(lrs_over([](optim::SGD& o) { return optim::LinearLR(o); }, 7),
              {1.0 / 3.0, 7.0 / 15.0, 3.0 / 5.0, 11.0 / 15.0, 13.0 / 15.0, 1.0, 1.0});
  expect_near(lrs_over([](optim::SGD& o) { return optim::ConstantLR(o, 0.5, 2); }, 4),
              {0.5, 0.5, 1.0, 1.0});
  expect_near(lrs_over([](optim::SGD& o) { return optim::ConstantLR(o); }, 6),
              {1.0 / 3.0, 1.0 / 3.0, 1.0 / 3.0, 1.0 / 3.0, 1.0 / 3.0, 1.0});
  const double half_pi_cos = (1.0 + std::cos(M_PI / 4.0)) / 2.0;
  expect_near(lrs_over([](optim::SGD& o) { return optim::CosineAnnealingLR(o, 4); }, 3),
              {1.0, half_pi_cos, 0.5});
  // An empty milestone list keeps the base rate.
  expect_near(lrs_over([](optim::SGD& o) { return optim::MultiStepLR(o, {}); }, 2), {1.0, 1.0});
}

TEST(LRScheduler, EveryGroupFollowsItsBaseRate) {
  Tensor a = zeros({1}).set_requires_grad(), b = zeros({1}).set_requires_grad();
  optim::SGD sgd({a}, {.lr = 1.0});
  sgd.add_param_group({b}, {.lr = 0.1});
  optim::ExponentialLR scheduler(sgd, 0.5);
  scheduler.step();
  expect_near(scheduler.get_last_lr(), {0.5, 0.05});
  expect_near(scheduler.base_lrs(), {1.0, 0.1});
}

TEST(LRScheduler, RejectsBadArguments) {
  Tensor p = zeros({1}).set_requires_grad();
  optim::SGD sgd({p}, {.lr = 1.0});
  EXPECT_HAS(error_of([&] { optim::MultiStepLR(sgd, {3, 2}); }), "[MultiStepLR] milestones");
  EXPECT_HAS(error_of([&] { optim::LinearLR(sgd, 0.0); }), "[LinearLR] start_factor");
  EXPECT_HAS(error_of([&] { optim::LinearLR(sgd, 0.5, 1.5); }), "[LinearLR] end_factor");
  EXPECT_HAS(error_of([&] { optim::LinearLR(sgd, 0.5, 1.0, 0); }), "[LinearLR] total_iters");
  EXPECT_HAS(error_of([&] { optim::ConstantLR(sgd, 2.0); }), "[ConstantLR] factor");
  optim::ExponentialLR scheduler(sgd, 0.5);
  EXPECT_HAS(error_of([&] { scheduler.set_epoch(-1); }), "[ExponentialLR] epoch");
}

TEST(LRScheduler, StateDictResumesTheSchedule) {
  Tensor p = zeros({1}).set_requires_grad();
  optim::SGD sgd({p}, {.lr = 1.0});
  optim::MultiStepLR scheduler(sgd, {2, 3}, 0.1);
  for (int i = 0; i < 3; ++i) scheduler.step();
  const StateDict state = scheduler.state_dict();
  EXPECT_EQ(state.at("last_epoch").item<int64_t>(), 3);
  EXPECT_EQ(state.at("base_lrs").to_vector<double>(), std::vector<double>{1.0});

  // A fresh run (whose optimizer starts at the base rate) resumes at epoch 3.
  Tensor q = zeros({1}).set_requires_grad();
  optim::SGD resumed_sgd({q}, {.lr = 1.0});
  optim::MultiStepLR resumed(resumed_sgd, {2, 3}, 0.1);
  resumed.load_state_dict(state);
  EXPECT_EQ(resumed.last_epoch(), 3);
  EXPECT_NEAR(resumed_sgd.lr(), 0.01, 1e-12);
  resumed.step();
  scheduler.step();
  EXPECT_NEAR(resumed_sgd.lr(), sgd.lr(), 1e-15);

  StateDict unknown = state;
  unknown.insert("gamma", Tensor::scalar(0.5, DType::f64));
  EXPECT_HAS(error_of([&] { resumed.load_state_dict(unknown); }),
             "[MultiStepLR.load_state_dict] unexpected key 'gamma'");
  StateDict missing;
  missing.insert("last_epoch", Tensor::scalar(1.0, DType::i64));
  EXPECT_HAS(error_of([&] { resumed.load_state_dict(missing); }), "missing key 'base_lrs'");
  StateDict two_groups;
  two_groups.insert("last_epoch", Tensor::scalar(1.0, DType::i64));
  two_groups.insert("base_lrs", make({1.0, 2.0}));
  EXPECT_HAS(error_of([&] { resumed.load_state_dict(two_groups); }), "1 parameter group(s)");
  EXPECT_EQ(resumed.last_epoch(), 4);  // a failed load changes nothing
}

TEST(LRScheduler, IsSavedInAndRestoredFromCheckpoints) {
  Tensor p = zeros({1}).set_requires_grad();
  optim::SGD sgd({p}, {.lr = 0.5});
  optim::StepLR scheduler(sgd, 1, 0.5);
  scheduler.step();
  scheduler.step();
  io::Checkpoint checkpoint;
  checkpoint.model.insert("p", p);
  checkpoint.optimizer = sgd.state_dict();
  checkpoint.scheduler = scheduler.state_dict();
  const std::string path =
      ::testing::TempDir() + "/lr_scheduler_checkpoint_" + std::to_string(::getpid()) + ".st";
  io::save_checkpoint(path, checkpoint);
  const io::Checkpoint loaded = io::load_checkpoint(path);
  std::remove(path.c_str());

  Tensor q = zeros({1}).set_requires_grad();
  optim::SGD resumed_sgd({q}, {.lr = 0.5});
  optim::StepLR resumed(resumed_sgd, 1, 0.5);
  resumed_sgd.load_state_dict(loaded.optimizer);
  resumed.load_state_dict(loaded.scheduler);
  EXPECT_EQ(resumed.last_epoch(), 2);
  EXPECT_NEAR(resumed_sgd.lr(), 0.125, 1e-15);
  expect_near(resumed.base_lrs(), {0.5});
}

}  // namespace
}  // namespace tessera::testing
