// The NCCL backend: backend names and the errors of builds and machines
// without it (always run); on a GPU a one-rank group running every
// collective on CUDA and CPU tensors, and with two GPUs collectives_worker
// under tessera-run (skipped otherwise).

#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>

#include "testing.h"

namespace tessera::distributed {
namespace {

using tessera::testing::ScopedEnv;

using tessera::testing::error_of;

#define TESSERA_REQUIRE_NCCL_GPUS(count)                                                   \
  if (!nccl_backend_built()) GTEST_SKIP() << "Tessera was built without the nccl backend"; \
  if (cuda::device_count() < (count))                                                      \
  GTEST_SKIP() << "needs " << (count) << " CUDA device(s), this machine has "              \
               << cuda::device_count() << (cuda::is_available() ? "" : ": ")               \
               << cuda::unavailable_reason()

// A fresh folder, removed with the object.
class TempDir {
 public:
  TempDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "tessera-nccl-XXXXXX").string();
    if (::mkdtemp(pattern.data()) != nullptr) path_ = pattern;
  }
  ~TempDir() {
    if (!path_.empty()) std::filesystem::remove_all(path_);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

TEST(NcclBackendTest, NamesParse) {
  EXPECT_EQ(parse_backend("nccl", "test"), Backend::nccl);
  EXPECT_STREQ(backend_name(Backend::nccl), "nccl");
  ScopedEnv told("TESSERA_BACKEND", "nccl");
  EXPECT_EQ(backend_from_env(), Backend::nccl);
  EXPECT_EQ(error_of([] { parse_backend("NCCL", "TESSERA_BACKEND"); }),
            "[init_process_group] TESSERA_BACKEND='NCCL' is not a backend; valid: gloo, mpi, nccl");
}

TEST(NcclBackendTest, MissingBuildOrGpuIsAClearError) {
  if (nccl_backend_built() && cuda::is_available()) GTEST_SKIP() << "this machine has a GPU";
  Environment env;  // one rank: no rendezvous needed
  const std::string message = error_of([&] { init_process_group(env, Backend::nccl); });
  if (!nccl_backend_built()) {
    EXPECT_EQ(message.rfind("[init_process_group] the nccl backend is not built into this "
                            "Tessera",
                            0),
              0u)
        << message;
    EXPECT_HAS(message, "-DTESSERA_WITH_CUDA=ON");
    EXPECT_FALSE(cuda::is_built());
  } else {
    EXPECT_EQ(message, "[init_process_group] the nccl backend needs a CUDA device: " +
                           cuda::unavailable_reason() +
                           "; use TESSERA_BACKEND=gloo for CPU tensors");
  }
  // The environment's choice says the same, and leaves the default group alone.
  ScopedEnv told("TESSERA_BACKEND", "nccl");
  EXPECT_EQ(error_of([] { init_process_group(Environment()); }), message);
  EXPECT_EQ(default_group()->size(), 1);
}

// Every collective of a one-rank group, on tensors of the group's device
// and (staged) on CPU tensors; results stay where the inputs were.
void check_one_rank(Group& group, Device device) {
  auto put = [&](const Tensor& t) { return t.to(device); };
  for (DType dtype : {DType::f32, DType::f64, DType::i64, DType::i32}) {
    for (ReduceOp op : {ReduceOp::sum, ReduceOp::max, ReduceOp::min}) {
      Tensor t = put(Tensor::from_vector<double>({1, -2, 3, 4, 5, 6}, {2, 3}).to(dtype));
      group.all_reduce(t, op);
      EXPECT_EQ(t.device(), device);
      EXPECT_EQ(t.to_vector<double>(), (std::vector<double>{1, -2, 3, 4, 5, 6}))
          << dtype_name(dtype) << " " << reduce_op_name(op);
    }
  }
  Tensor bytes = put(Tensor::from_vector<uint8_t>({1, 2, 250}, {3}));
  std::vector<Tensor> gathered = group.all_gather(bytes);
  ASSERT_EQ(gathered.size(), 1u);
  EXPECT_EQ(gathered[0].device(), device);
  EXPECT_EQ(gathered[0].to_vector<int64_t>(), (std::vector<int64_t>{1, 2, 250}));
  std::vector<Tensor> scalars = group.all_gather(put(Tensor::scalar(2.5, DType::f64)));
  EXPECT_EQ(scalars[0].dim(), 0);
  EXPECT_EQ(scalars[0].item<double>(), 2.5);
  std::vector<Tensor> uneven =
      group.all_gather_uneven(put(Tensor::from_vector<int64_t>({1, 2, 3, 4, 5, 6}, {3, 2})));
  EXPECT_EQ(uneven[0].shape(), Shape({3, 2}));
  EXPECT_EQ(uneven[0].to_vector<int64_t>(), (std::vector<int64_t>{1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(group.all_gather_uneven(put(Tensor::empty({0, 2}, DType::f32)))[0].shape(),
            Shape({0, 2}));
  Tensor scattered =
      group.reduce_scatter({put(Tensor::from_vector<float>({1.5f, 2, 3}, {3}))}, ReduceOp::max);
  EXPECT_EQ(scattered.device(), device);
  EXPECT_EQ(scattered.to_vector<float>(), (std::vector<float>{1.5f, 2, 3}));
  std::vector<Tensor> exchanged =
      group.all_to_all({put(Tensor::from_vector<int32_t>({7, 8, 9, 10}, {2, 2}))});
  EXPECT_EQ(exchanged[0].device(), device);
  EXPECT_EQ(exchanged[0].shape(), Shape({2, 2}));
  EXPECT_EQ(exchanged[0].to_vector<int32_t>(), (std::vector<int32_t>{7, 8, 9, 10}));
  // Large enough for NCCL to cut into several chunks.
  std::vector<float> ramp(300001);
  for (size_t i = 0; i < ramp.size(); ++i) ramp[i] = static_cast<float>(i % 1000);
  Tensor large = put(Tensor::from_vector(ramp, {static_cast<int64_t>(ramp.size())}));
  group.broadcast(large, 0);
  EXPECT_EQ(large.to_vector<float>(), ramp);
  group.all_reduce(large, ReduceOp::sum);
  EXPECT_EQ(large.to_vector<float>(), ramp);
  group.barrier();
  // Bad inputs raise on the calling rank, naming the op.
  EXPECT_HAS(error_of([&] { group.all_reduce(bytes); }), "[all_reduce] rank 0 of 1: dtype u8");
  EXPECT_HAS(error_of([&] { group.send(bytes, 0); }), "[send] rank 0 of 1: cannot send to or ");
  EXPECT_HAS(error_of([&] { group.broadcast(bytes, 1); }),
             "[broadcast] rank 0 of 1: rank 1 is "
             "outside [0, 1)");
  Tensor strided = put(Tensor::from_vector<float>({1, 2, 3, 4}, {2, 2})).t();
  EXPECT_HAS(error_of([&] { group.all_reduce(strided); }), "needs a contiguous tensor");
}

TEST(NcclGroupTest, OneRankRunsEveryCollective) {
  TESSERA_REQUIRE_NCCL_GPUS(1);
  TempDir folder;
  ASSERT_FALSE(folder.path().empty());
  Environment env;
  env.rendezvous = "file://" + folder.path() + "/rdzv";
  env.timeout = std::chrono::seconds(30);
  std::shared_ptr<Group> group = init_process_group(env, Backend::nccl);
  EXPECT_EQ(group->rank(), 0);
  EXPECT_EQ(group->size(), 1);
  EXPECT_EQ(default_group(), group);
  check_one_rank(*group, Device{DeviceType::cuda, 0});
  check_one_rank(*group, Device{});
  std::shared_ptr<Group> sub = group->split({0});
  EXPECT_EQ(sub->size(), 1);
  Tensor t = Tensor::from_vector<int64_t>({4}, {1}).cuda();
  sub->all_reduce(t);
  EXPECT_EQ(t.item<int64_t>(), 4);
  EXPECT_HAS(error_of([&] { group->split({1}); }), "[split] rank 0 of 1");
  if (cuda::device_count() >= 2) {
    Tensor elsewhere = Tensor::from_vector<float>({1}, {1}).cuda(1);
    EXPECT_HAS(error_of([&] { group->all_reduce(elsewhere); }),
               "needs a tensor on cuda:0 (the group's device) or the CPU, got cuda:1");
  }
  // The folder now holds this job's keys: a second job there is refused.
  EXPECT_HAS(error_of([&] { init_process_group(env, Backend::nccl); }),
             "key 'world/0' already exists");
  set_default_group(nullptr);
}

#ifdef TESSERA_RUN_PATH
// collectives_worker in `mode` on 2 ranks under tessera-run with TESSERA_BACKEND=nccl.
std::pair<int, std::string> run_workers(const std::string& mode, int timeout_s) {
  const std::filesystem::path log = std::filesystem::temp_directory_path() /
                                    ("tessera_nccl_test_" + std::to_string(::getpid()) + ".log");
  const std::string command =
      "env -u RANK -u WORLD_SIZE -u LOCAL_RANK -u TESSERA_RDZV "
      "TESSERA_BACKEND=nccl timeout -k 5 120 " +
      std::string(TESSERA_RUN_PATH) + " -n 2 --timeout " + std::to_string(timeout_s) + " " +
      TESSERA_COLLECTIVES_WORKER + " " + mode + " > " + log.string() + " 2>&1";
  const int raw = std::system(command.c_str());
  std::ifstream file(log);
  std::stringstream text;
  text << file.rdbuf();
  std::filesystem::remove(log);
  return {WIFEXITED(raw) ? WEXITSTATUS(raw) : -1, text.str()};
}

TEST(NcclGroupTest, TwoRanksRunTheCollectivesWorker) {
  TESSERA_REQUIRE_NCCL_GPUS(2);
  auto [status, output] = run_workers("all", 60);
  EXPECT_EQ(status, 0) << output;
  auto [which_status, which] = run_workers("which", 60);
  EXPECT_EQ(which_status, 0) << which;
  EXPECT_HAS(which, "N7tessera11distributed9NcclGroupE");
}

TEST(NcclGroupTest, StalledPeerTimesOutAndAborts) {
  TESSERA_REQUIRE_NCCL_GPUS(2);
  // Rank 1 sleeps 2.5 s and leaves without entering the all_reduce; rank 0
  // gives up after its 1 s timeout.
  auto [status, output] = run_workers("stall", 1);
  EXPECT_NE(status, 0) << output;
  EXPECT_HAS(output, "[all_reduce] rank 0 of 2 timed out after 1000 ms");
  EXPECT_HAS(output, "the NCCL communicator was aborted");
}
#endif

}  // namespace
}  // namespace tessera::distributed
