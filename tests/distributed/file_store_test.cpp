#include "tessera/distributed/file_store.h"

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <thread>
#include <vector>

#include "testing.h"

namespace tessera::distributed {
namespace {

using namespace std::chrono_literals;
using tessera::testing::error_of;

// A fresh folder per test, removed afterwards.
class FileStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern =
        (std::filesystem::temp_directory_path() / "tessera-store-test-XXXXXX").string();
    ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string dir_;
};

std::vector<char> bytes(const std::string& text) {
  return {text.begin(), text.end()};
}

TEST_F(FileStoreTest, SetThenGetRoundTripsAnyKeyAndBinaryValue) {
  FileStore store(dir_, 1s);
  const std::vector<char> binary = {'\0', '\xff', 'a', '\n'};
  store.set("world/0", binary);
  store.set("../escape", bytes("x"));
  store.set("", bytes("empty key"));
  EXPECT_EQ(store.get("world/0"), binary);
  EXPECT_EQ(store.get("../escape"), bytes("x"));
  EXPECT_EQ(store.get(""), bytes("empty key"));
  EXPECT_TRUE(store.check("world/0"));
  EXPECT_FALSE(store.check("world/1"));
  store.set("world/0", bytes("replaced"));
  EXPECT_EQ(store.get("world/0"), bytes("replaced"));
  // Keys never escape the directory.
  EXPECT_FALSE(std::filesystem::exists(std::filesystem::path(dir_).parent_path() / "escape"));
}

TEST_F(FileStoreTest, GetWaitsForAKeySetByAnotherThread) {
  FileStore reader(dir_, 5s);
  std::thread writer([&] {
    std::this_thread::sleep_for(50ms);
    FileStore(dir_, 5s).set("late", bytes("value"));
  });
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(reader.get("late"), bytes("value"));
  EXPECT_GE(std::chrono::steady_clock::now() - start, 40ms);
  writer.join();
}

TEST_F(FileStoreTest, WaitReturnsOnceAllKeysExist) {
  FileStore store(dir_, 5s);
  std::thread writer([&] {
    for (const char* key : {"k0", "k1", "k2"}) {
      std::this_thread::sleep_for(10ms);
      store.set(key, bytes("v"));
    }
  });
  store.wait({"k0", "k1", "k2"});
  EXPECT_TRUE(store.check("k2"));
  writer.join();
}

TEST_F(FileStoreTest, TimeoutNamesTheMissingKeyAndTheTimeWaited) {
  FileStore store(dir_, 100ms);
  store.set("present", bytes("v"));
  const auto start = std::chrono::steady_clock::now();
  const std::string message = error_of([&] { store.wait({"present", "absent"}); });
  EXPECT_GE(std::chrono::steady_clock::now() - start, 100ms);
  EXPECT_EQ(message.rfind("[FileStore] timed out after", 0), 0u) << message;
  EXPECT_NE(message.find("'absent'"), std::string::npos) << message;
  EXPECT_EQ(message.find("'present'"), std::string::npos) << message;
  EXPECT_NE(message.find("timeout 100 ms"), std::string::npos) << message;
  EXPECT_NE(error_of([&] { store.get("never"); }).find("'never'"), std::string::npos);
}

TEST_F(FileStoreTest, AddIsAtomicAcrossThreadsAndStores) {
  constexpr int kThreads = 4, kAdds = 50;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      FileStore store(dir_, 5s);  // separate objects, as separate processes would have
      for (int i = 0; i < kAdds; ++i) store.add("counter", t + 1);
    });
  }
  for (auto& thread : threads) thread.join();
  FileStore store(dir_, 1s);
  EXPECT_EQ(store.add("counter", 0), kAdds * (1 + 2 + 3 + 4));
  EXPECT_EQ(store.add("fresh", -5), -5);
  EXPECT_EQ(store.get("fresh"), bytes("-5"));
}

TEST_F(FileStoreTest, AddRejectsNonCountersAndOverflow) {
  FileStore store(dir_, 1s);
  store.set("text", bytes("12abc"));
  EXPECT_NE(error_of([&] { store.add("text", 1); }).find("not a decimal counter"),
            std::string::npos);
  store.add("big", INT64_MAX);
  EXPECT_NE(error_of([&] { store.add("big", 1); }).find("overflow"), std::string::npos);
  EXPECT_EQ(store.add("big", 0), INT64_MAX);
}

TEST_F(FileStoreTest, RejectsBadConstruction) {
  EXPECT_EQ(error_of([] { FileStore("", std::chrono::seconds(1)); }).rfind("[FileStore]", 0), 0u);
  EXPECT_NE(error_of([&] { FileStore(dir_, 0ms); }).find("timeout must be positive"),
            std::string::npos);
  FileStore(dir_, 1s).set("file", bytes("x"));
  EXPECT_NE(error_of([&] { FileStore(dir_ + "/k_file", 1s); }).find("cannot create directory"),
            std::string::npos);
}

TEST_F(FileStoreTest, CreateLetsExactlyOneOfManyRacersClaimAKey) {
  FileStore store(dir_, 1s);
  constexpr int kRacers = 8;
  std::vector<int> won(kRacers, 0);
  std::vector<std::thread> racers;
  for (int i = 0; i < kRacers; ++i)
    racers.emplace_back([&, i] { won[i] = store.create("rank/0", bytes(std::to_string(i))); });
  for (std::thread& racer : racers) racer.join();
  int winners = 0;
  for (int i = 0; i < kRacers; ++i) {
    if (!won[i]) continue;
    ++winners;
    EXPECT_EQ(store.get("rank/0"), bytes(std::to_string(i)));  // the winner's value, whole
  }
  EXPECT_EQ(winners, 1);
  EXPECT_FALSE(store.create("rank/0", bytes("late")));
}

}  // namespace
}  // namespace tessera::distributed
