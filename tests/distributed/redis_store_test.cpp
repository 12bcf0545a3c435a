// RedisStore against a real redis-server that the suite starts on a free
// port (no persistence) and stops at the end; skipped when redis-server is
// not installed. Also runs a collective job through tessera-run with
// --rdzv redis://127.0.0.1:PORT.

#include "tessera/distributed/redis_store.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "tessera/distributed/group.h"
#include "testing.h"

extern char** environ;

namespace tessera::distributed {
namespace {

using namespace std::chrono_literals;
using tessera::testing::error_of;

std::vector<char> bytes(const std::string& text) {
  return {text.begin(), text.end()};
}

// A TCP port on 127.0.0.1 that nothing listened on a moment ago.
int free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return 0;
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof(address);
  int port = 0;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) == 0) {
    port = ntohs(address.sin_port);
  }
  ::close(fd);
  return port;
}

bool in_path(const std::string& program) {
  const char* path = std::getenv("PATH");
  std::stringstream folders(path != nullptr ? path : "/usr/bin:/bin");
  for (std::string folder; std::getline(folders, folder, ':');) {
    if (::access((folder + "/" + program).c_str(), X_OK) == 0) return true;
  }
  return false;
}

class RedisStoreTest : public ::testing::Test {
 protected:
  // Starts redis-server and waits until it answers.
  static void SetUpTestSuite() {
    if (!in_path("redis-server")) return;
    port_ = free_port();
    const std::string port = std::to_string(port_);
    std::vector<std::string> args = {
        "redis-server", "--port", port, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"};
    std::vector<char*> argv;
    for (std::string& arg : args) argv.push_back(arg.data());
    argv.push_back(nullptr);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0);
    const int error = posix_spawnp(&pid_, "redis-server", &actions, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    if (error != 0) {
      pid_ = -1;
      port_ = 0;
      return;
    }
    for (auto start = std::chrono::steady_clock::now();
         std::chrono::steady_clock::now() - start < 10s; std::this_thread::sleep_for(10ms)) {
      try {
        RedisStore(host(), port_, "tessera/ping/", 1s).check("ping");
        return;
      } catch (const Error&) {
        // Not listening yet.
      }
    }
    TearDownTestSuite();
  }
  static void TearDownTestSuite() {
    if (pid_ > 0) {
      ::kill(pid_, SIGTERM);
      ::waitpid(pid_, nullptr, 0);
    }
    pid_ = -1;
    port_ = 0;
  }
  void SetUp() override {
    if (port_ == 0) GTEST_SKIP() << "redis-server is not installed (or did not start)";
  }
  static std::string host() { return "127.0.0.1"; }
  static std::string url() { return "redis://" + host() + ":" + std::to_string(port_); }
  // A key space of its own for each test.
  static std::string prefix() {
    return std::string("tessera/") +
           ::testing::UnitTest::GetInstance()->current_test_info()->name() + "/";
  }

  static inline pid_t pid_ = -1;
  static inline int port_ = 0;
};

TEST_F(RedisStoreTest, SetGetCheckAndBinaryValues) {
  RedisStore store(host(), port_, prefix(), 1s);
  const std::vector<char> binary = {'\0', '\xff', 'a', '\n', ' '};
  store.set("world/0", binary);
  store.set("", bytes("empty key"));
  EXPECT_EQ(store.get("world/0"), binary);
  EXPECT_EQ(store.get(""), bytes("empty key"));
  EXPECT_TRUE(store.check("world/0"));
  EXPECT_FALSE(store.check("world/1"));
  store.set("world/0", bytes("replaced"));
  EXPECT_EQ(store.get("world/0"), bytes("replaced"));
  store.set("empty", {});
  EXPECT_TRUE(store.get("empty").empty());
}

TEST_F(RedisStoreTest, JobsSharingAServerDoNotSeeEachOthersKeys) {
  RedisStore first(host(), port_, prefix() + "a/", 1s);
  RedisStore second(host(), port_, prefix() + "b/", 1s);
  first.set("world/0", bytes("first"));
  EXPECT_FALSE(second.check("world/0"));
  second.set("world/0", bytes("second"));
  EXPECT_EQ(first.get("world/0"), bytes("first"));
  EXPECT_EQ(second.add("counter", 5), 5);
  EXPECT_EQ(first.add("counter", 1), 1);
}

TEST_F(RedisStoreTest, GetWaitsForAKeySetByAnotherClient) {
  RedisStore reader(host(), port_, prefix(), 5s);
  std::thread writer([&] {
    std::this_thread::sleep_for(50ms);
    RedisStore(host(), port_, prefix(), 5s).set("late", bytes("value"));
  });
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(reader.get("late"), bytes("value"));
  EXPECT_GE(std::chrono::steady_clock::now() - start, 40ms);
  writer.join();
}

TEST_F(RedisStoreTest, TimeoutNamesTheMissingKeysAndTheServer) {
  RedisStore store(host(), port_, prefix(), 100ms);
  store.set("here", bytes("x"));
  const std::string message = error_of([&] { store.wait({"here", "gone", "lost"}); });
  EXPECT_NE(message.find("[RedisStore] timed out after"), std::string::npos) << message;
  EXPECT_NE(message.find("'gone', 'lost'"), std::string::npos) << message;
  EXPECT_EQ(message.find("'here'"), std::string::npos) << message;
  EXPECT_NE(message.find(url()), std::string::npos) << message;
  EXPECT_NE(error_of([&] { store.get("gone"); }).find("'gone'"), std::string::npos);
}

TEST_F(RedisStoreTest, AddIsAtomicAcrossClients) {
  constexpr int kThreads = 4;
  constexpr int kAdds = 50;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      RedisStore store(host(), port_, prefix(), 5s);
      for (int i = 0; i < kAdds; ++i) store.add("counter", 1);
    });
  }
  for (auto& thread : threads) thread.join();
  RedisStore store(host(), port_, prefix(), 1s);
  EXPECT_EQ(store.add("counter", 0), kThreads * kAdds);
  EXPECT_EQ(store.add("counter", -kThreads * kAdds), 0);
  store.set("text", bytes("not a number"));
  EXPECT_NE(error_of([&] { store.add("text", 1); }).find("[RedisStore] INCRBY"), std::string::npos);
}

TEST_F(RedisStoreTest, OneProcessGroupRendezvousesAndRefusesAReusedJob) {
  Environment env;
  env.timeout = 5s;
  env.rendezvous = url() + "/" + prefix().substr(8, prefix().size() - 9);
  std::shared_ptr<Group> group = init_process_group(env);
  Tensor t = Tensor::from_vector<float>({2.5f}, {1});
  group->all_reduce(t);
  EXPECT_EQ(t.item<float>(), 2.5f);
  const std::string message = error_of([&] { init_process_group(env); });
  EXPECT_NE(message.find("key 'rank/0' already exists"), std::string::npos) << message;
  EXPECT_NE(message.find(env.rendezvous), std::string::npos) << message;
}

TEST(RedisStoreErrorsTest, UnreachableServerIsNamed) {
  const int port = free_port();
  const std::string message = error_of([&] { RedisStore("127.0.0.1", port, "tessera/", 1s); });
  EXPECT_NE(
      message.find("[RedisStore] cannot connect to redis://127.0.0.1:" + std::to_string(port)),
      std::string::npos)
      << message;
}

TEST(RedisStoreErrorsTest, UrlParsing) {
  RedisUrl url = RedisUrl::parse("redis://node-3.cluster:6380/run_1.b");
  EXPECT_EQ(url.host, "node-3.cluster");
  EXPECT_EQ(url.port, 6380);
  EXPECT_EQ(url.job, "run_1.b");
  EXPECT_EQ(url.key_prefix(), "tessera/run_1.b/");
  url = RedisUrl::parse("redis://127.0.0.1:6379");
  EXPECT_EQ(url.job, "");
  EXPECT_EQ(url.key_prefix(), "tessera/");
  EXPECT_NE(error_of([] { RedisUrl::parse("redis://:6379"); }).find("needs a host and a port"),
            std::string::npos);
  EXPECT_NE(error_of([] { RedisUrl::parse("redis://h:0"); }).find("port '0'"), std::string::npos);
  EXPECT_NE(error_of([] { RedisUrl::parse("redis://h:1/"); }).find("without a job name"),
            std::string::npos);
  EXPECT_NE(error_of([] { RedisUrl::parse("redis://h:1/a b"); }).find("job name 'a b'"),
            std::string::npos);
}

#ifdef TESSERA_RUN_PATH
struct LaunchResult {
  int status;
  std::string output;
};

LaunchResult launch(const std::string& options, const std::string& mode) {
  const std::filesystem::path log = std::filesystem::temp_directory_path() /
                                    ("tessera_redis_launch_" + std::to_string(::getpid()) + ".log");
  const std::string command =
      std::string(TESSERA_RUN_PATH) + " " + options + " " + TESSERA_COLLECTIVES_WORKER + " " + mode;
  const int raw = std::system((command + " > " + log.string() + " 2>&1").c_str());
  std::ifstream file(log);
  std::stringstream text;
  text << file.rdbuf();
  std::filesystem::remove(log);
  return {WIFEXITED(raw) ? WEXITSTATUS(raw) : -1, text.str()};
}

TEST_F(RedisStoreTest, EveryCollectiveUnderTesseraRunWithRedisRendezvous) {
  // No job name: the launcher picks a fresh one, so the same URL works twice.
  for (int run = 0; run < 2; ++run) {
    LaunchResult result = launch("-n 3 --timeout 30 --rdzv " + url(), "all");
    EXPECT_EQ(result.status, 0) << result.output;
  }
  // A named job is used as given; each launcher binds its keys to a fresh
  // job id, so only a run under the same TESSERA_JOB_ID finds its old keys.
  const std::string named = url() + "/" + prefix().substr(8, prefix().size() - 9);
  EXPECT_EQ(launch("-n 2 --timeout 30 --rdzv " + named, "all").status, 0);
  tessera::testing::ScopedEnv same_job("TESSERA_JOB_ID", "job-reused");
  EXPECT_EQ(launch("-n 2 --timeout 30 --rdzv " + named, "all").status, 0);
  LaunchResult again = launch("-n 2 --timeout 30 --rdzv " + named, "all");
  EXPECT_NE(again.status, 0);
  EXPECT_NE(again.output.find("already exists in the rendezvous '" + named), std::string::npos)
      << again.output;
}
#endif

}  // namespace
}  // namespace tessera::distributed
