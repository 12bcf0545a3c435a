// Starts N copies of collectives_worker as real processes with the
// launcher's environment contract and checks how they exit.

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "tessera/distributed/file_store.h"
#include "tessera/distributed/group.h"
#include "tessera/distributed/rendezvous.h"
#include "testing.h"

extern char** environ;

namespace tessera::distributed {
namespace {

using namespace std::chrono_literals;

struct RankResult {
  int exit_code = -1;  // -1: killed at the deadline
  std::string stderr_text;
};

struct JobResult {
  std::vector<RankResult> ranks;
  std::chrono::milliseconds elapsed{0};
};

// Runs `world_size` workers in `mode` with a fresh rendezvous folder; kills
// whatever is still running after `deadline`.
JobResult run_job(int world_size, const std::string& mode, int timeout_s,
                  std::chrono::milliseconds deadline) {
  std::string pattern =
      (std::filesystem::temp_directory_path() / "tessera-collectives-XXXXXX").string();
  EXPECT_NE(::mkdtemp(pattern.data()), nullptr);
  const std::filesystem::path dir = pattern;
  std::vector<std::string> inherited;
  for (char** var = environ; *var != nullptr; ++var) {
    const std::string text = *var;
    const std::string name = text.substr(0, text.find('='));
    if (name != "RANK" && name != "WORLD_SIZE" && name != "LOCAL_RANK" &&
        name != "LOCAL_WORLD_SIZE" && name != "TESSERA_RDZV" && name != "TESSERA_TIMEOUT_S") {
      inherited.push_back(text);
    }
  }
  std::vector<pid_t> pids;
  for (int rank = 0; rank < world_size; ++rank) {
    std::vector<std::string> env = inherited;
    env.push_back("RANK=" + std::to_string(rank));
    env.push_back("WORLD_SIZE=" + std::to_string(world_size));
    env.push_back("LOCAL_RANK=" + std::to_string(rank));
    env.push_back("LOCAL_WORLD_SIZE=" + std::to_string(world_size));
    env.push_back("TESSERA_RDZV=file://" + (dir / "rdzv").string());
    env.push_back("TESSERA_TIMEOUT_S=" + std::to_string(timeout_s));
    std::vector<char*> envp;
    for (auto& text : env) envp.push_back(text.data());
    envp.push_back(nullptr);
    std::string program = TESSERA_COLLECTIVES_WORKER;
    std::vector<char*> argv = {program.data(), const_cast<char*>(mode.c_str()), nullptr};
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    const std::string log = (dir / ("stderr." + std::to_string(rank))).string();
    posix_spawn_file_actions_addopen(&actions, 2, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    pid_t pid = -1;
    const int error =
        posix_spawn(&pid, program.c_str(), &actions, nullptr, argv.data(), envp.data());
    posix_spawn_file_actions_destroy(&actions);
    EXPECT_EQ(error, 0) << "cannot start " << program;
    pids.push_back(error == 0 ? pid : -1);
  }
  JobResult result;
  result.ranks.resize(world_size);
  const auto start = std::chrono::steady_clock::now();
  int running = world_size;
  std::vector<bool> done(world_size, false);
  for (int rank = 0; rank < world_size; ++rank) done[rank] = pids[rank] < 0;
  running -= static_cast<int>(std::count(done.begin(), done.end(), true));
  while (running > 0) {
    for (int rank = 0; rank < world_size; ++rank) {
      int status = 0;
      if (done[rank] || ::waitpid(pids[rank], &status, WNOHANG) != pids[rank]) continue;
      done[rank] = true;
      --running;
      result.ranks[rank].exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128;
    }
    if (std::chrono::steady_clock::now() - start > deadline) {
      for (int rank = 0; rank < world_size; ++rank) {
        if (done[rank]) continue;
        ::kill(pids[rank], SIGKILL);
        ::waitpid(pids[rank], nullptr, 0);
      }
      break;
    }
    std::this_thread::sleep_for(5ms);
  }
  result.elapsed = std::chrono::duration_cast<std::chrono::milliseconds>(
      std::chrono::steady_clock::now() - start);
  for (int rank = 0; rank < world_size; ++rank) {
    std::ifstream log(dir / ("stderr." + std::to_string(rank)));
    std::stringstream text;
    text << log.rdbuf();
    result.ranks[rank].stderr_text = text.str();
  }
  std::filesystem::remove_all(dir);
  return result;
}

class CollectivesTest : public ::testing::TestWithParam<int> {};

TEST_P(CollectivesTest, EveryCollectiveMatchesLocalReference) {
  const int world_size = GetParam();
  JobResult job = run_job(world_size, "all", 20, 60s);
  for (int rank = 0; rank < world_size; ++rank) {
    EXPECT_EQ(job.ranks[rank].exit_code, 0)
        << "rank " << rank << " of " << world_size << ": " << job.ranks[rank].stderr_text;
  }
}

INSTANTIATE_TEST_SUITE_P(WorldSizes, CollectivesTest, ::testing::Values(1, 2, 3, 4));

TEST(CollectivesFailureTest, LostPeerEndsTheOtherRanksWithinTheTimeout) {
  constexpr int kWorldSize = 3;
  // Over TCP (in shared memory, see the next test).
  tessera::testing::ScopedEnv tcp_only("TESSERA_SHARED_MEMORY", "0");
  JobResult job = run_job(kWorldSize, "die_early", 5, 30s);
  EXPECT_EQ(job.ranks[kWorldSize - 1].exit_code, 3);  // the rank that left
  for (int rank = 0; rank < kWorldSize - 1; ++rank) {
    EXPECT_EQ(job.ranks[rank].exit_code, 1) << job.ranks[rank].stderr_text;
    EXPECT_NE(job.ranks[rank].stderr_text.find("[all_reduce] rank " + std::to_string(rank)),
              std::string::npos)
        << job.ranks[rank].stderr_text;
    // Every survivor names the rank that left, not only the one connected to
    // it (a survivor that failed first may be listed too: "lost rank 1 (...),
    // rank 2 (process 4242 exited)").
    EXPECT_NE(job.ranks[rank].stderr_text.find("; lost rank "), std::string::npos)
        << job.ranks[rank].stderr_text;
    EXPECT_NE(job.ranks[rank].stderr_text.find("rank 2 (process "), std::string::npos)
        << job.ranks[rank].stderr_text;
  }
  EXPECT_LT(job.elapsed, 10s);  // the 5 s timeout plus start-up, not the 30 s deadline
}

// The same once all_reduce runs through shared memory (all ranks on this
// machine): the survivors see the process gone, or time out, and name the rank.
TEST(CollectivesFailureTest, LostOrStalledPeerInSharedMemoryAllReduceIsNamed) {
  constexpr int kWorldSize = 3;
  JobResult lost = run_job(kWorldSize, "die_later", 5, 30s);
  EXPECT_EQ(lost.ranks[kWorldSize - 1].exit_code, 3);
  for (int rank = 0; rank < kWorldSize - 1; ++rank) {
    const std::string& text = lost.ranks[rank].stderr_text;
    EXPECT_EQ(lost.ranks[rank].exit_code, 1) << text;
    EXPECT_NE(text.find("[all_reduce] rank " + std::to_string(rank) + " of 3"), std::string::npos)
        << text;
    // Seen in shared memory, or on the TCP connection that still carries
    // the layout checks, whichever comes first.
    EXPECT_TRUE(text.find("lost rank 2") != std::string::npos ||
                text.find("lost the connection to rank 2") != std::string::npos)
        << text;
  }
  EXPECT_LT(lost.elapsed, 10s);  // seen at once, not at the 5 s timeout
  JobResult stalled = run_job(kWorldSize, "stall_later", 1, 30s);
  for (int rank = 0; rank < kWorldSize - 1; ++rank) {
    const std::string& text = stalled.ranks[rank].stderr_text;
    EXPECT_EQ(stalled.ranks[rank].exit_code, 1) << text;
    EXPECT_NE(text.find("timed out after 1000 ms waiting for rank 2"), std::string::npos) << text;
  }
}

// A rank killed with SIGKILL in the middle of a data-parallel step (its
// peers wait in the gradients' all-reduce) or of boxing (its peers wait in an
// all-to-all): every survivor fails, naming rank 1, well before the timeout.
TEST(CollectivesFailureTest, EverySurvivorNamesARankKilledInAStepOrInBoxing) {
  for (const std::string mode : {"killed_in_dp_step", "killed_in_boxing"}) {
    for (const char* shared_memory : {"1", "0"}) {
      SCOPED_TRACE(mode + " with TESSERA_SHARED_MEMORY=" + shared_memory);
      tessera::testing::ScopedEnv setting("TESSERA_SHARED_MEMORY", shared_memory);
      JobResult job = run_job(3, mode, 30, 90s);
      EXPECT_EQ(job.ranks[1].exit_code, 128)
          << "rank 1 was not killed: " << job.ranks[1].stderr_text;
      // A survivor talking to both others may see the other survivor leave
      // (after it named rank 1) before it sees rank 1's loss itself, so each
      // survivor names rank 1 or the other survivor, and one names rank 1.
      auto names = [](const std::string& text, int lost) {
        const std::string r = std::to_string(lost);
        return text.find("lost rank " + r) != std::string::npos ||
               text.find("lost the connection to rank " + r) != std::string::npos ||
               text.find("rank " + r + " (process ") != std::string::npos;
      };
      bool someone_named_rank_1 = false;
      for (int rank : {0, 2}) {
        const std::string& text = job.ranks[rank].stderr_text;
        EXPECT_EQ(job.ranks[rank].exit_code, 1) << text;
        const bool named = names(text, 1);
        someone_named_rank_1 = someone_named_rank_1 || named;
        EXPECT_TRUE(named || names(text, 2 - rank))
            << "rank " << rank << " names neither rank 1 nor the other survivor: " << text;
      }
      EXPECT_TRUE(someone_named_rank_1) << job.ranks[0].stderr_text << job.ranks[2].stderr_text;
      EXPECT_LT(job.elapsed, 25s);  // seen when rank 1 goes, not at the 30 s timeout
    }
  }
}

// A peer that joined and published its address but never answers (a hung
// process): init gives up within its one timeout for the whole rendezvous
// and connect, not once per wait or per connection attempt.
TEST(CollectivesFailureTest, APeerThatPublishedButNeverAnswersFailsInitWithinTheTimeout) {
  std::string pattern =
      (std::filesystem::temp_directory_path() / "tessera-silent-peer-XXXXXX").string();
  ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
  const std::filesystem::path dir = pattern;
  const std::string url = "file://" + (dir / "rdzv").string();
  // A socket that listens and never accepts or answers.
  const int silent = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(silent, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof address;
  ASSERT_EQ(::bind(silent, reinterpret_cast<sockaddr*>(&address), length), 0);
  ASSERT_EQ(::listen(silent, 16), 0);
  ASSERT_EQ(::getsockname(silent, reinterpret_cast<sockaddr*>(&address), &length), 0);

  // Rank 1 claims its rank as a real one would, from this process.
  FileStore store((dir / "rdzv").string(), 20s);
  const std::string prefix = job_key_prefix(job_id_from_env());
  std::thread claim([&] { join_rendezvous(store, prefix, 1, 2, url, Deadline(20s)); });

  std::vector<std::string> env;
  for (char** var = environ; *var != nullptr; ++var) env.push_back(*var);
  for (const char* setting :
       {"RANK=0", "WORLD_SIZE=2", "LOCAL_RANK=0", "LOCAL_WORLD_SIZE=2", "TESSERA_TIMEOUT_S=2"}) {
    env.push_back(setting);
  }
  env.push_back("TESSERA_RDZV=" + url);
  std::vector<char*> envp;
  for (auto& text : env) envp.push_back(text.data());
  envp.push_back(nullptr);
  std::string program = TESSERA_COLLECTIVES_WORKER;
  std::string mode = "all";
  std::vector<char*> argv = {program.data(), mode.data(), nullptr};
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  const std::string log = (dir / "stderr.0").string();
  posix_spawn_file_actions_addopen(&actions, 2, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  pid_t pid = -1;
  const auto start = std::chrono::steady_clock::now();
  ASSERT_EQ(posix_spawn(&pid, program.c_str(), &actions, nullptr, argv.data(), envp.data()), 0);
  posix_spawn_file_actions_destroy(&actions);

  // Rank 1's address: rank 0's own, pointed at the silent socket.
  std::vector<char> addresses = store.get(prefix + "world/0");
  ASSERT_GE(addresses.size(), sizeof(sockaddr_in));
  sockaddr_in peer{};
  std::memcpy(&peer, addresses.data(), sizeof peer);
  peer.sin_port = address.sin_port;
  std::memcpy(addresses.data(), &peer, sizeof peer);
  store.set(prefix + "world/1", addresses);
  claim.join();

  int status = 0;
  while (::waitpid(pid, &status, WNOHANG) == 0 && std::chrono::steady_clock::now() - start < 30s) {
    std::this_thread::sleep_for(5ms);
  }
  const auto elapsed = std::chrono::steady_clock::now() - start;
  if (::waitpid(pid, &status, WNOHANG) == 0) {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, &status, 0);
  }
  ::close(silent);
  std::ifstream file(log);
  std::stringstream text;
  text << file.rdbuf();
  std::filesystem::remove_all(dir);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 1) << text.str();
  EXPECT_NE(text.str().find("2000 ms"), std::string::npos) << text.str();
  // One 2 s deadline, where each connection attempt used to get the whole
  // timeout five times over (10 s).
  EXPECT_LT(elapsed, 6s) << text.str();
}

// TESSERA_SHARED_MEMORY=0 keeps every collective on TCP; all still agree.
TEST(CollectivesFailureTest, EveryCollectiveOverTcpOnly) {
  JobResult job = [] {
    tessera::testing::ScopedEnv tcp_only("TESSERA_SHARED_MEMORY", "0");
    return run_job(3, "all", 20, 60s);
  }();
  for (int rank = 0; rank < 3; ++rank) {
    EXPECT_EQ(job.ranks[rank].exit_code, 0) << job.ranks[rank].stderr_text;
  }
}

TEST(CollectivesFailureTest, StalledPeerTimesOutTheOthers) {
  constexpr int kWorldSize = 3;
  // The stalled rank sleeps 2.5 s; the others must give up after their 1 s
  // timeout. Over TCP (in shared memory: LostOrStalledPeerInSharedMemoryAllReduceIsNamed).
  tessera::testing::ScopedEnv tcp_only("TESSERA_SHARED_MEMORY", "0");
  JobResult job = run_job(kWorldSize, "stall", 1, 30s);
  // Only a rank waiting on the stalled one is sure to time out itself; the
  // other may first see that rank leave. Both must fail with the op named.
  int timed_out = 0;
  for (int rank = 0; rank < kWorldSize - 1; ++rank) {
    const std::string& text = job.ranks[rank].stderr_text;
    EXPECT_EQ(job.ranks[rank].exit_code, 1) << text;
    EXPECT_NE(text.find("[all_reduce] rank " + std::to_string(rank) + " of 3"), std::string::npos)
        << text;
    timed_out += text.find("timed out after 1000 ms") != std::string::npos;
    // The stalled rank is named: alive but absent from the call, or gone by then.
    EXPECT_TRUE(text.find("waiting on rank 2") != std::string::npos ||
                text.find("lost rank 2") != std::string::npos)
        << text;
  }
  EXPECT_GE(timed_out, 1);
  EXPECT_EQ(job.ranks[kWorldSize - 1].exit_code, 0);
}

TEST(CollectivesFailureTest, CachedLayoutMeetingANewOneFailsNamingBoth) {
  // Rank 0 has checked f32 [3] before and skips the wait; rank 1's f32 [4]
  // is new to it, so it waits for the layouts and raises at once. Rank 0's
  // transfer cannot match (its slot carries its layout); it fails when rank
  // 1 leaves, well before the 20 s timeout, and names both shapes too.
  JobResult job = run_job(2, "mismatch_cached", 20, 60s);
  for (int rank = 0; rank < 2; ++rank) {
    const std::string& text = job.ranks[rank].stderr_text;
    EXPECT_EQ(job.ranks[rank].exit_code, 1) << text;
    EXPECT_NE(text.find("[all_reduce] rank " + std::to_string(rank) + " of 2"), std::string::npos)
        << text;
    EXPECT_NE(text.find("f32 [3]"), std::string::npos) << text;
    EXPECT_NE(text.find("f32 [4]"), std::string::npos) << text;
  }
  EXPECT_LT(job.elapsed, 15s);
}

TEST(CollectivesFailureTest, SingleProcessGroupNeedsNoRendezvous) {
  Environment env;  // rank 0 of 1, no TESSERA_RDZV
  env.timeout = 5s;
  std::shared_ptr<Group> group = init_process_group(env);
  EXPECT_EQ(group->rank(), 0);
  EXPECT_EQ(group->size(), 1);
  Tensor t = Tensor::from_vector<double>({1.5, -2.0}, {2});
  group->all_reduce(t, ReduceOp::max);
  EXPECT_TRUE(tessera::testing::all_close(t, std::vector<double>{1.5, -2.0}));
  EXPECT_EQ(group->split({0})->size(), 1);
  EXPECT_NE(tessera::testing::error_of([&] { group->split({1}); }).find("[split] rank 0 of 1"),
            std::string::npos);
}

TEST(CollectivesFailureTest, LoneProcessLeavesNoRendezvousFolder) {
  std::string pattern = (std::filesystem::temp_directory_path() / "tessera-tmp-XXXXXX").string();
  ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
  {
    tessera::testing::ScopedEnv tmpdir("TMPDIR", pattern);
    Environment env;
    env.timeout = 5s;
    EXPECT_EQ(init_process_group(env)->size(), 1);
  }
  EXPECT_TRUE(std::filesystem::is_empty(pattern)) << pattern;
  std::filesystem::remove_all(pattern);
}

TEST(CollectivesFailureTest, RanksStartedWithDifferentWorldSizesNameBoth) {
  Environment env;
  env.timeout = 5s;
  std::string pattern = (std::filesystem::temp_directory_path() / "tessera-sizes-XXXXXX").string();
  ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
  env.rendezvous = "file://" + pattern;
  tessera::testing::ScopedEnv no_job("TESSERA_JOB_ID", std::nullopt);
  // Rank 0 of a job of 2 has claimed its rank; rank 1 was started for 3 ranks.
  FileStore store(pattern, 5s);
  const std::string rank0 = RankRecord{2, 1, "elsewhere"}.encode();
  ASSERT_TRUE(store.create(rank_key("", 0), std::vector<char>(rank0.begin(), rank0.end())));
  env.rank = 1;
  env.world_size = 3;
  env.local_world_size = 3;
  env.local_rank = 1;
  const std::string message = tessera::testing::error_of([&] { init_process_group(env); });
  EXPECT_NE(message.find("[init_process_group] rank 1 was started with world size 3 (WORLD_SIZE) "
                         "but rank 0 with world size 2"),
            std::string::npos)
      << message;
  std::filesystem::remove_all(pattern);
}

TEST(CollectivesFailureTest, ReusedRendezvousFolderIsRefusedNamingIt) {
  std::string pattern = (std::filesystem::temp_directory_path() / "tessera-reused-XXXXXX").string();
  ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
  Environment env;
  env.timeout = 5s;
  env.rendezvous = "file://" + pattern;
  tessera::testing::ScopedEnv no_job("TESSERA_JOB_ID", std::nullopt);
  EXPECT_EQ(init_process_group(env)->size(), 1);  // leaves its claim behind, as a job does
  const std::string message = tessera::testing::error_of([&] { init_process_group(env); });
  EXPECT_NE(message.find("[init_process_group] rank 0: key 'rank/0' already exists"),
            std::string::npos)
      << message;
  EXPECT_NE(message.find(pattern), std::string::npos) << message;
  std::filesystem::remove_all(pattern);
}

#ifdef TESSERA_RUN_PATH
// The same jobs started the way users start them: through tessera-run.
struct LaunchResult {
  int status;
  std::string output;
  std::chrono::duration<double> elapsed;
};

LaunchResult launch(const std::string& options, const std::string& mode) {
  static std::atomic<int> launches{0};
  const std::filesystem::path log =
      std::filesystem::temp_directory_path() /
      ("tessera_launch_" + std::to_string(::getpid()) + "_" + std::to_string(launches++) + ".log");
  const std::string command =
      std::string(TESSERA_RUN_PATH) + " " + options + " " + TESSERA_COLLECTIVES_WORKER + " " + mode;
  const auto start = std::chrono::steady_clock::now();
  const int raw = std::system((command + " > " + log.string() + " 2>&1").c_str());
  const auto elapsed = std::chrono::steady_clock::now() - start;
  std::ifstream file(log);
  std::stringstream text;
  text << file.rdbuf();
  std::filesystem::remove(log);
  return {WIFEXITED(raw) ? WEXITSTATUS(raw) : -1, text.str(), elapsed};
}

TEST(CollectivesLaunchTest, EveryCollectiveUnderTesseraRun) {
  for (int world_size : {2, 4}) {
    LaunchResult result = launch("-n " + std::to_string(world_size) + " --timeout 60", "all");
    EXPECT_EQ(result.status, 0) << result.output;
  }
}

TEST(CollectivesLaunchTest, TwoJobsStartedAtOnceOnOneFolderStayApart) {
  // Each tessera-run gives its ranks a fresh job id that every key is bound
  // to, so two jobs on one --rdzv folder never form one group.
  std::string pattern =
      (std::filesystem::temp_directory_path() / "tessera-twojobs-XXXXXX").string();
  ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
  const std::string options = "-n 2 --timeout 20 --rdzv file://" + pattern;
  LaunchResult second;
  std::thread other([&] { second = launch(options, "which"); });
  LaunchResult first = launch(options, "which");
  other.join();
  EXPECT_EQ(first.status, 0) << first.output;
  EXPECT_EQ(second.status, 0) << second.output;
  std::filesystem::remove_all(pattern);
}

TEST(CollectivesLaunchTest, LostRankFailsTheWholeJobQuickly) {
  // The last of 3 ranks exits (status 3) before an all_reduce: tessera-run
  // stops the others and returns that status well within the 5 s timeout.
  LaunchResult result = launch("-n 3 --timeout 5", "die_early");
  EXPECT_NE(result.status, 0) << result.output;
  EXPECT_NE(result.output.find("rank 2"), std::string::npos) << result.output;
  EXPECT_LT(result.elapsed, std::chrono::seconds(10));
}
#endif

}  // namespace
}  // namespace tessera::distributed
