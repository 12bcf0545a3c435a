// Runs the built tessera-run on small /bin/sh ranks and checks what it
// promises: the environment contract, prefixed and complete output, failure
// propagation within seconds, signal forwarding, usage errors and cleanup.
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "testing.h"

namespace tessera::testing {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

struct Result {
  int status = -1;  // exit code, or 128 + signal
  std::string out;
  std::string err;
  double seconds = 0;
};

std::string read_text(const fs::path& path) {
  std::ifstream file(path);
  std::stringstream text;
  text << file.rdbuf();
  return text.str();
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream stream(text);
  for (std::string line; std::getline(stream, line);) lines.push_back(line);
  return lines;
}

// True once `pid` has ended (gone, or a zombie nobody has reaped yet).
bool process_gone(pid_t pid) {
  if (kill(pid, 0) != 0) return true;
  const std::string stat = read_text("/proc/" + std::to_string(pid) + "/stat");
  const size_t paren = stat.rfind(')');
  return stat.empty() || (paren != std::string::npos && stat.substr(paren + 2, 1) == "Z");
}

class LauncherTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = (fs::temp_directory_path() / "tessera-launcher-test-XXXXXX").string();
    ASSERT_NE(mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Starts tessera-run with `args`, its stdout and stderr going to files.
  pid_t start(const std::vector<std::string>& args) {
    const std::string out = (dir_ / "launcher.out").string();
    const std::string err = (dir_ / "launcher.err").string();
    std::vector<std::string> argv_strings{TESSERA_RUN_PATH};
    argv_strings.insert(argv_strings.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (std::string& arg : argv_strings) argv.push_back(arg.data());
    argv.push_back(nullptr);
    const pid_t pid = fork();
    if (pid == 0) {
      const int out_fd = open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      const int err_fd = open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      dup2(out_fd, STDOUT_FILENO);
      dup2(err_fd, STDERR_FILENO);
      execv(argv[0], argv.data());
      _exit(126);
    }
    started_ = Clock::now();
    return pid;
  }

  // Waits for the launcher (killing it after `limit_s`) and collects its output.
  Result finish(pid_t pid, double limit_s = 20) {
    Result result;
    int status = 0;
    while (waitpid(pid, &status, WNOHANG) == 0) {
      if (std::chrono::duration<double>(Clock::now() - started_).count() > limit_s) {
        ADD_FAILURE() << "tessera-run still running after " << limit_s << " s";
        kill(pid, SIGKILL);
        waitpid(pid, &status, 0);
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    result.seconds = std::chrono::duration<double>(Clock::now() - started_).count();
    result.status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    result.out = read_text(dir_ / "launcher.out");
    result.err = read_text(dir_ / "launcher.err");
    return result;
  }

  Result run(const std::vector<std::string>& args) { return finish(start(args)); }

  // tessera-run -n N /bin/sh -c script, with the test directory as $1.
  Result run_sh(int ranks, const std::string& script, std::vector<std::string> options = {}) {
    options.insert(options.end(),
                   {"-n", std::to_string(ranks), "/bin/sh", "-c", script, "sh", dir_.string()});
    return run(options);
  }

  // Waits until `count` files named prefix* exist in the test directory.
  bool wait_for_files(const std::string& prefix, size_t count, double limit_s = 10) {
    const auto until = Clock::now() + std::chrono::duration<double>(limit_s);
    while (Clock::now() < until) {
      size_t found = 0;
      for (const auto& entry : fs::directory_iterator(dir_))
        found += entry.path().filename().string().starts_with(prefix) ? 1 : 0;
      if (found >= count) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return false;
  }

  std::vector<pid_t> pids_in(const std::string& prefix) {
    std::vector<pid_t> pids;
    for (const auto& entry : fs::directory_iterator(dir_))
      if (entry.path().filename().string().starts_with(prefix))
        pids.push_back(std::stoi(read_text(entry.path())));
    return pids;
  }

  void expect_all_gone(const std::vector<pid_t>& pids) {
    for (pid_t pid : pids) {
      bool gone = false;
      for (int attempt = 0; attempt < 100 && !gone; ++attempt) {
        gone = process_gone(pid);
        if (!gone) std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
      EXPECT_TRUE(gone) << "process " << pid << " outlived tessera-run";
      if (!gone) kill(pid, SIGKILL);
    }
  }

  fs::path dir_;
  Clock::time_point started_;
};

TEST_F(LauncherTest, SetsTheEnvironmentForOneToFourRanks) {
  for (int ranks = 1; ranks <= 4; ++ranks) {
    const Result result =
        run_sh(ranks, "echo \"$RANK $WORLD_SIZE $LOCAL_RANK $LOCAL_WORLD_SIZE $TESSERA_RDZV\"");
    ASSERT_EQ(result.status, 0) << result.err;
    EXPECT_EQ(result.err, "");
    const std::vector<std::string> lines = lines_of(result.out);
    ASSERT_EQ(lines.size(), static_cast<size_t>(ranks)) << result.out;
    std::set<int> seen;
    std::set<std::string> rendezvous;
    for (const std::string& line : lines) {
      int prefix_rank = -1, rank = -1, world = -1, local = -1, local_world = -1;
      char url[4096] = {};
      ASSERT_EQ(std::sscanf(line.c_str(), "[rank %d] %d %d %d %d %4095s", &prefix_rank, &rank,
                            &world, &local, &local_world, url),
                6)
          << line;
      EXPECT_EQ(prefix_rank, rank);
      EXPECT_EQ(world, ranks);
      EXPECT_EQ(local, rank);
      EXPECT_EQ(local_world, ranks);
      seen.insert(rank);
      rendezvous.insert(url);
    }
    EXPECT_EQ(seen.size(), static_cast<size_t>(ranks));
    EXPECT_EQ(*seen.begin(), 0);
    EXPECT_EQ(*seen.rbegin(), ranks - 1);
    // One fresh directory shared by all ranks, removed at the end.
    ASSERT_EQ(rendezvous.size(), 1u);
    const std::string url = *rendezvous.begin();
    ASSERT_TRUE(url.starts_with("file:///")) << url;
    EXPECT_FALSE(fs::exists(url.substr(7))) << url << " was not removed";
  }
}

TEST_F(LauncherTest, MultiNodeRanksAndTimeout) {
  const std::string rendezvous = "file://" + (dir_ / "rdzv").string();
  const Result result =
      run_sh(3, "echo \"$RANK $WORLD_SIZE $LOCAL_RANK $LOCAL_WORLD_SIZE $TESSERA_TIMEOUT_S\"",
             {"--nnodes", "2", "--node-rank", "1", "--rdzv", rendezvous, "--timeout", "7"});
  ASSERT_EQ(result.status, 0) << result.err;
  std::set<std::string> lines;
  for (const std::string& line : lines_of(result.out)) lines.insert(line);
  EXPECT_EQ(lines, (std::set<std::string>{"[rank 3] 3 6 0 3 7", "[rank 4] 4 6 1 3 7",
                                          "[rank 5] 5 6 2 3 7"}));
}

TEST_F(LauncherTest, GivenRendezvousIsPassedAndKept) {
  fs::create_directory(dir_ / "rdzv");
  const std::string rendezvous = "file://" + (dir_ / "rdzv").string();
  const Result result = run_sh(2, "echo \"$TESSERA_RDZV\"", {"--rdzv", rendezvous});
  ASSERT_EQ(result.status, 0) << result.err;
  for (const std::string& line : lines_of(result.out))
    EXPECT_TRUE(line.ends_with("] " + rendezvous));
  EXPECT_TRUE(fs::is_directory(dir_ / "rdzv"));
}

TEST_F(LauncherTest, OutputIsPrefixedCompleteAndKeepsItsStream) {
  // 300 stdout lines, 100 stderr lines and a last stdout line without '\n'.
  const Result result =
      run_sh(3,
             "i=0; while [ $i -lt 300 ]; do echo \"out $RANK $i\"; i=$((i+1)); done;"
             "i=0; while [ $i -lt 100 ]; do echo \"err $RANK $i\" >&2; i=$((i+1)); done;"
             "printf 'tail %s' $RANK");
  ASSERT_EQ(result.status, 0) << result.err;
  std::map<int, std::vector<std::string>> out_by_rank, err_by_rank;
  for (const auto& [text, by_rank] :
       {std::pair{&result.out, &out_by_rank}, std::pair{&result.err, &err_by_rank}})
    for (const std::string& line : lines_of(*text)) {
      int rank = -1;
      ASSERT_EQ(std::sscanf(line.c_str(), "[rank %d] ", &rank), 1) << line;
      const std::string prefix = "[rank " + std::to_string(rank) + "] ";
      ASSERT_TRUE(line.starts_with(prefix)) << line;
      (*by_rank)[rank].push_back(line.substr(prefix.size()));
    }
  ASSERT_EQ(out_by_rank.size(), 3u);
  ASSERT_EQ(err_by_rank.size(), 3u);
  for (int rank = 0; rank < 3; ++rank) {
    const std::vector<std::string>& out = out_by_rank[rank];
    const std::vector<std::string>& err = err_by_rank[rank];
    ASSERT_EQ(out.size(), 301u);
    ASSERT_EQ(err.size(), 100u);
    for (int i = 0; i < 300; ++i)
      EXPECT_EQ(out[static_cast<size_t>(i)],
                "out " + std::to_string(rank) + " " + std::to_string(i));
    for (int i = 0; i < 100; ++i)
      EXPECT_EQ(err[static_cast<size_t>(i)],
                "err " + std::to_string(rank) + " " + std::to_string(i));
    EXPECT_EQ(out.back(), "tail " + std::to_string(rank));
  }
  EXPECT_TRUE(result.out.ends_with("\n"));
}

TEST_F(LauncherTest, FailingRankStopsTheOthersAndSetsTheStatus) {
  // Ranks 0, 1, 3 sleep in a grandchild; rank 2 waits until they are up, then
  // fails. Their whole process trees must be gone when tessera-run returns.
  const Result result =
      run_sh(4,
             "if [ $RANK = 2 ]; then"
             "  n=0; while [ $(ls \"$1\" | grep -c '^pid') -lt 3 ] && [ $n -lt 500 ]; do"
             "    sleep 0.01; n=$((n+1)); done; echo failing >&2; exit 3; fi;"
             "sleep 60 & echo $! > \"$1/pid.$RANK\"; wait");
  EXPECT_EQ(result.status, 3) << result.err;
  EXPECT_LT(result.seconds, 5.0);
  EXPECT_HAS(result.err, "[rank 2] failing\n");
  EXPECT_HAS(result.err, "tessera-run: rank 2 exited with status 3\n");
  // Only the first failure is reported; the others were stopped by us.
  EXPECT_EQ(result.err.find("rank 0 "), std::string::npos) << result.err;
  const std::vector<pid_t> sleepers = pids_in("pid.");
  EXPECT_EQ(sleepers.size(), 3u);
  expect_all_gone(sleepers);
}

TEST_F(LauncherTest, RanksIgnoringSigtermAreKilledAfterTheGracePeriod) {
  const Result result =
      run_sh(2,
             "if [ $RANK = 1 ]; then sleep 0.2; exit 5; fi; trap '' TERM; echo $$ > \"$1/pid.0\";"
             "while true; do sleep 0.05; done");
  EXPECT_EQ(result.status, 5) << result.err;
  EXPECT_GT(result.seconds, 1.5);
  EXPECT_LT(result.seconds, 5.0);
  expect_all_gone(pids_in("pid."));
}

TEST_F(LauncherTest, LeftoverProcessHoldingTheOutputIsKilled) {
  // The rank succeeds but leaves a subshell writing to its stdout later.
  const Result result = run_sh(1, "(sleep 30; echo late) & echo $! > \"$1/pid.0\"; echo started");
  EXPECT_EQ(result.status, 0) << result.err;
  EXPECT_EQ(result.out, "[rank 0] started\n");
  EXPECT_GT(result.seconds, 1.5);
  EXPECT_LT(result.seconds, 5.0);
  expect_all_gone(pids_in("pid."));
}

TEST_F(LauncherTest, RankKilledBySignalGives128PlusSignal) {
  const Result result = run_sh(2, "if [ $RANK = 0 ]; then kill -KILL $$; fi; exec sleep 60");
  EXPECT_EQ(result.status, 137) << result.err;
  EXPECT_LT(result.seconds, 5.0);
  EXPECT_HAS(result.err, "tessera-run: rank 0 killed by signal SIGKILL\n");
}

TEST_F(LauncherTest, RankKilledBySignalIsTheCauseEvenWhenSeenSecond) {
  // Rank 1 exits 1 and, a moment later, rank 0 is SIGKILLed: the launcher
  // sees the survivor-like failure first, but the kill is the cause.
  const Result result = run_sh(2,
                               "if [ $RANK = 0 ]; then echo $$ > \"$1/pid.0\"; exec sleep 60; fi;"
                               "while [ ! -s \"$1/pid.0\" ]; do sleep 0.01; done;"
                               "(sleep 0.02; kill -KILL $(cat \"$1/pid.0\")) & exit 1");
  EXPECT_EQ(result.status, 137) << result.err;
  EXPECT_HAS(result.err, "tessera-run: rank 0 killed by signal SIGKILL\n");
}

TEST_F(LauncherTest, RankLeavingEarlyWithStatusZeroIsNamed) {
  const Result result =
      run_sh(2, "if [ $RANK = 1 ]; then exit 0; fi; sleep 0.5; echo lost my peer >&2; exit 1");
  EXPECT_EQ(result.status, 1) << result.err;
  EXPECT_HAS(result.err,
             "tessera-run: rank 1 exited with status 0 while other ranks were still running");
  EXPECT_HAS(result.err, "tessera-run: rank 0 exited with status 1\n");
}

TEST_F(LauncherTest, KilledLauncherLeavesNoRendezvousFolder) {
  const pid_t launcher =
      start({"-n", "1", "/bin/sh", "-c", "echo \"$TESSERA_RDZV\" > \"$1/rdzv.0\"; exec sleep 60",
             "sh", dir_.string()});
  ASSERT_TRUE(wait_for_files("rdzv.", 1));
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // let the write finish
  const std::string folder = lines_of(read_text(dir_ / "rdzv.0")).at(0).substr(7);
  ASSERT_TRUE(fs::is_directory(folder)) << folder;
  ASSERT_EQ(kill(launcher, SIGKILL), 0);
  finish(launcher);
  bool removed = false;
  for (int attempt = 0; attempt < 500 && !removed; ++attempt) {
    removed = !fs::exists(folder);
    if (!removed) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_TRUE(removed) << folder << " outlived a SIGKILLed tessera-run";
  if (!removed) fs::remove_all(folder);
}

// A rank killed while setting up shared memory leaves its segment
// (/dev/shm/tessera-<job>-<pid>-<n>) behind; the launcher's watchdog removes
// the job's segments even when the launcher itself is SIGKILLed.
TEST_F(LauncherTest, KilledLauncherLeavesNoSharedMemorySegment) {
  const pid_t launcher =
      start({"-n", "1", "/bin/sh", "-c",
             "touch \"/dev/shm/tessera-$TESSERA_JOB_ID-$$-0\"; echo \"$TESSERA_JOB_ID\" > "
             "\"$1/job.0\"; exec sleep 60",
             "sh", dir_.string()});
  ASSERT_TRUE(wait_for_files("job.", 1));
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // let the write finish
  const std::string job = lines_of(read_text(dir_ / "job.0")).at(0);
  ASSERT_FALSE(job.empty());
  auto segments = [&] {
    std::vector<fs::path> found;
    for (const auto& entry : fs::directory_iterator("/dev/shm")) {
      if (entry.path().filename().string().starts_with("tessera-" + job + "-")) {
        found.push_back(entry.path());
      }
    }
    return found;
  };
  ASSERT_EQ(segments().size(), 1u);
  ASSERT_EQ(kill(launcher, SIGKILL), 0);
  finish(launcher);
  bool removed = false;
  for (int attempt = 0; attempt < 500 && !removed; ++attempt) {
    removed = segments().empty();
    if (!removed) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_TRUE(removed) << "a segment of job " << job << " outlived a SIGKILLed tessera-run";
  for (const fs::path& path : segments()) fs::remove(path);
}

TEST_F(LauncherTest, ForwardsSigtermAndRemovesTheRendezvous) {
  const pid_t launcher = start({"-n", "2", "/bin/sh", "-c",
                                "echo $$ > \"$1/pid.$RANK\"; echo \"$TESSERA_RDZV\" > "
                                "\"$1/rdzv.$RANK\"; exec sleep 60",
                                "sh", dir_.string()});
  ASSERT_TRUE(wait_for_files("rdzv.", 2));
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // let the writes finish
  const std::string url = lines_of(read_text(dir_ / "rdzv.0")).at(0);
  ASSERT_TRUE(fs::is_directory(url.substr(7))) << url;
  ASSERT_EQ(kill(launcher, SIGTERM), 0);
  const Result result = finish(launcher);
  EXPECT_EQ(result.status, 128 + SIGTERM) << result.err;
  EXPECT_LT(result.seconds, 5.0);
  EXPECT_HAS(result.err, "killed by signal SIGTERM");
  expect_all_gone(pids_in("pid."));
  EXPECT_FALSE(fs::exists(url.substr(7)));
}

TEST_F(LauncherTest, ExecFailureIs127AndNamesTheProgram) {
  // Executable, but its interpreter does not exist: found, yet exec fails.
  const fs::path script = dir_ / "broken.sh";
  std::ofstream(script) << "#!/nonexistent/interpreter\n";
  fs::permissions(script, fs::perms::owner_all);
  const Result result = run({"-n", "2", script.string()});
  EXPECT_EQ(result.status, 127);
  EXPECT_HAS(result.err, "cannot execute '" + script.string() + "': No such file or directory");
  EXPECT_HAS(result.err, "exited with status 127");
}

TEST_F(LauncherTest, BadUsageExitsWith2) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{}, "missing -n"},
      {{"/bin/true"}, "missing -n"},
      {{"/bin/true", "-n", "1"}, "(options go before the program)"},
      {{"-n", "2"}, "missing the program"},
      {{"-n"}, "-n needs a value"},
      {{"-n", "0", "/bin/true"}, "-n must be an integer in [1, 1024], got '0'"},
      {{"-n", "two", "/bin/true"}, "got 'two'"},
      {{"-n", "2x", "/bin/true"}, "got '2x'"},
      {{"--frob", "-n", "1", "/bin/true"}, "unknown option '--frob'"},
      {{"-n", "1", "tessera-no-such-program"}, "'tessera-no-such-program' not found in PATH"},
      {{"-n", "1", "/nonexistent/program"}, "'/nonexistent/program' not found"},
      {{"-n", "1", "--nnodes", "2", "/bin/true"}, "--nnodes 2 needs --rdzv"},
      {{"-n", "1", "--nnodes", "2", "--node-rank", "2", "--rdzv", "file:///x", "/bin/true"},
       "--node-rank 2 must be in [0, 2)"},
      {{"-n", "1", "--rdzv", "somewhere", "/bin/true"}, "--rdzv must be a URL"},
      {{"-n", "1", "--timeout", "-1", "/bin/true"}, "--timeout must be"},
  };
  for (const auto& [args, message] : cases) {
    const Result result = run(args);
    EXPECT_EQ(result.status, 2) << result.err;
    EXPECT_TRUE(result.err.starts_with("tessera-run: ")) << result.err;
    EXPECT_HAS(result.err, message);
    EXPECT_HAS(result.err, "usage: tessera-run");
  }
}

TEST_F(LauncherTest, MoreRanksThanTheOpenFileLimitAllows) {
  // 40 ranks need 80 pipe ends, over a soft limit of 64: the launcher raises
  // its own limit, and the ranks still see 64.
  const std::string out = (dir_ / "ulimit.out").string();
  const std::string command = "ulimit -Sn 64 && '" + std::string(TESSERA_RUN_PATH) +
                              "' -n 40 /bin/sh -c 'ulimit -Sn' > '" + out + "'";
  const int status = std::system(command.c_str());
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  const std::vector<std::string> lines = lines_of(read_text(out));
  EXPECT_EQ(lines.size(), 40u);
  for (const std::string& line : lines) EXPECT_TRUE(line.ends_with("] 64")) << line;
}

TEST_F(LauncherTest, AllRanksSucceedingGivesZeroAndArgumentsPassThrough) {
  // printf is found through PATH; its output has no final newline.
  const Result result = run({"-n", "2", "--", "printf", "%s|", "-n", "--rdzv", "a b"});
  EXPECT_EQ(result.status, 0) << result.err;
  const std::string line = "-n|--rdzv|a b|\n";
  EXPECT_TRUE(result.out == "[rank 0] " + line + "[rank 1] " + line ||
              result.out == "[rank 1] " + line + "[rank 0] " + line)
      << result.out;
}

}  // namespace
}  // namespace tessera::testing
