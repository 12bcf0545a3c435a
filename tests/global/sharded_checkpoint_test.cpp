// Sharded checkpoints under attack: hostile and tampered indexes, folders
// that mix two saves, and (through tessera-run) jobs killed while saving.

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <limits>
#include <random>
#include <regex>
#include <set>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "io/io_testing.h"
#include "tessera/global/sharded_checkpoint.h"
#include "tessera/global/sharded_index.h"
#include "testing.h"

extern char** environ;

namespace tessera {
namespace {

using testing::error_of;
using testing::TempDir;

std::string read_text(const std::filesystem::path& path) {
  std::ifstream file(path);
  std::stringstream text;
  text << file.rdbuf();
  return text.str();
}

void write_text(const std::filesystem::path& path, const std::string& text) {
  std::ofstream(path, std::ios::trunc) << text;
}

StateDict sample_state(double value) {
  StateDict state;
  state.insert("weight", full({4, 3}, value));
  state.insert("steps", full({2}, value, DType::i64));
  return state;
}

StateDict zero_state() {
  StateDict state;
  state.insert("weight", zeros({4, 3}));
  state.insert("steps", zeros({2}, DType::i64));
  return state;
}

TEST(ShardedCheckpointTest, EachSaveIsANewGenerationAndLeavesNothingBehind) {
  TempDir dir;
  global::save_sharded(dir.path().string(), sample_state(1));
  const global::ShardedIndex first =
      global::parse_sharded_index(read_text(dir.path() / "index.json"), "index.json");
  EXPECT_EQ(first.format, "tessera-sharded-2");
  EXPECT_EQ(first.generation.size(), 16u);
  // Leftovers of a killed save: a temporary file of a process that no longer
  // exists, a shard of another generation, and a version-1 shard.
  write_text(dir.path() / "shard-0-0123456789abcdef.safetensors", "torn");
  write_text(dir.path() / "shard-3.safetensors", "old");
  write_text(dir.path() / "index.json.tmp-elsewhere-1-0", "other host");
  write_text(dir.path() / "notes.txt", "the user's");

  global::save_sharded(dir.path().string(), sample_state(2));
  const global::ShardedIndex second =
      global::parse_sharded_index(read_text(dir.path() / "index.json"), "index.json");
  EXPECT_NE(second.generation, first.generation);
  const std::vector<std::string> expected{"index.json", "notes.txt",
                                          "shard-0-" + second.generation + ".safetensors"};
  EXPECT_EQ(dir.entries(), expected);

  StateDict loaded = zero_state();
  global::load_sharded(dir.path().string(), loaded);
  EXPECT_EQ(loaded.at("weight").to_vector<float>(), std::vector<float>(12, 2.0f));
  EXPECT_EQ(loaded.at("steps").to_vector<int64_t>(), std::vector<int64_t>(2, 2));
}

TEST(ShardedCheckpointTest, AShardOfAnotherSaveIsAnErrorNamingIt) {
  TempDir old_dir, dir;
  global::save_sharded(old_dir.path().string(), sample_state(1));
  global::save_sharded(dir.path().string(), sample_state(2));
  const global::ShardedIndex index =
      global::parse_sharded_index(read_text(dir.path() / "index.json"), "index.json");
  const global::ShardedIndex old_index =
      global::parse_sharded_index(read_text(old_dir.path() / "index.json"), "index.json");
  const std::string name = global::shard_file_name(0, index.generation);
  // The other save's shard under this save's name: only its metadata tells.
  std::filesystem::copy_file(old_dir.path() / global::shard_file_name(0, old_index.generation),
                             dir.path() / name, std::filesystem::copy_options::overwrite_existing);
  StateDict loaded = zero_state();
  const std::string message = error_of([&] { global::load_sharded(dir.path().string(), loaded); });
  EXPECT_HAS(message, "[load_sharded]");
  EXPECT_HAS(message, name);
  EXPECT_HAS(message, "mixes two saves");
  EXPECT_EQ(loaded.at("weight").to_vector<float>(), std::vector<float>(12, 0.0f));
}

TEST(ShardedCheckpointTest, TamperedIndexesAreErrorsNeverOutOfBoundsAccess) {
  TempDir dir;
  global::save_sharded(dir.path().string(), sample_state(3));
  const nlohmann::json index = nlohmann::json::parse(read_text(dir.path() / "index.json"));
  const std::string outside = (dir.path().parent_path() / "outside.safetensors").string();
  write_text(outside, "x");
  struct Case {
    std::function<void(nlohmann::json&)> edit;
    std::string expected;
  };
  using nlohmann::json;
  auto weight_piece = [](json& j) -> json& { return j["tensors"]["weight"]["pieces"][0]; };
  const std::vector<Case> cases = {
      {[&](json& j) {
         weight_piece(j)["start"] = {INT64_MAX, 0};
       },
       "outside the tensor"},
      {[&](json& j) {
         weight_piece(j)["start"] = {-1, 0};
       },
       "valid: 0.."},
      {[&](json& j) {
         weight_piece(j)["start"] = {1, 0};
       },
       "outside the tensor"},
      {[&](json& j) {
         weight_piece(j)["size"] = {4, INT64_MAX};
       },
       "outside the tensor"},
      {[&](json& j) { weight_piece(j)["start"] = {0}; }, "1-d start"},
      {[&](json& j) { weight_piece(j)["start"] = "zero"; }, "must be an array"},
      {[&](json& j) {
         weight_piece(j)["start"] = {0.5, 0};
       },
       "must be an integer"},
      {[&](json& j) {
         weight_piece(j)["start"] = {UINT64_MAX, 0};
       },
       "valid: 0.."},
      {[&](json& j) { weight_piece(j)["file"] = "../outside.safetensors"; },
       "names file '../outside"},
      {[&](json& j) { weight_piece(j)["file"] = outside; }, "names file"},
      {[&](json& j) { weight_piece(j)["file"] = 7; }, "must be a string"},
      {[&](json& j) { weight_piece(j).erase("file"); }, "has no 'file'"},
      {[&](json& j) { j["tensors"]["weight"]["dtype"] = "complex"; }, "not a Tessera dtype"},
      {[&](json& j) {
         j["tensors"]["weight"]["shape"] = {4, -3};
       },
       "valid: 0.."},
      {[&](json& j) {
         j["tensors"]["weight"]["shape"] = {INT64_MAX, 3};
       },
       "64 bits"},
      {[&](json& j) { j["tensors"]["weight"]["pieces"] = 5; }, "pieces must be an array"},
      {[&](json& j) { j["tensors"]["weight"]["pieces"] = json::array(); }, "cover 0 of the 12"},
      {[&](json& j) { j["format"] = "tessera-sharded-9"; }, "format is"},
      {[&](json& j) { j["generation"] = "../../x"; }, "16 hex digits"},
      {[&](json& j) { j["world_size"] = json::object(); }, "must be an integer"},
      {[&](json& j) { j["tensors"] = json::array(); }, "'tensors' must be an object"},
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    json edited = index;
    cases[i].edit(edited);
    write_text(dir.path() / "index.json", edited.dump());
    StateDict loaded = zero_state();
    const std::string message =
        error_of([&] { global::load_sharded(dir.path().string(), loaded); });
    EXPECT_HAS(message, "[load_sharded]") << " case " << i;
    EXPECT_HAS(message, cases[i].expected) << " case " << i;
  }
  // A stored dtype other than the index's is not converted: an i64 shard
  // read as f32 would be silently wrong numbers.
  {
    json edited = index;
    edited["tensors"]["steps"]["dtype"] = "f32";
    write_text(dir.path() / "index.json", edited.dump());
    StateDict loaded;
    loaded.insert("weight", zeros({4, 3}));
    loaded.insert("steps", zeros({2}));
    const std::string message =
        error_of([&] { global::load_sharded(dir.path().string(), loaded); });
    EXPECT_HAS(message, "'steps' in shard-0-");
    EXPECT_HAS(message, "is i64 [2] but the index says f32");
  }
  for (const std::string& text : {std::string("[]"), std::string("{\"format\": 1}"),
                                  std::string(100000, '['), std::string("{} trailing")}) {
    write_text(dir.path() / "index.json", text);
    StateDict loaded = zero_state();
    EXPECT_HAS(error_of([&] { global::load_sharded(dir.path().string(), loaded); }),
               "[load_sharded] index '" + (dir.path() / "index.json").string());
  }
  std::filesystem::remove(outside);
}

TEST(ShardedCheckpointTest, ANamedPipeIsRefusedNotWaitedOn) {
  TempDir dir;
  ASSERT_EQ(::mkfifo((dir.path() / "index.json").c_str(), 0600), 0);
  StateDict loaded = zero_state();
  EXPECT_HAS(error_of([&] { global::load_sharded(dir.path().string(), loaded); }),
             "not a regular file");
}

#ifdef TESSERA_RUN_PATH
// Starts `argv` in the background; returns its pid.
pid_t spawn(const std::vector<std::string>& args) {
  std::vector<char*> argv;
  for (const std::string& arg : args) argv.push_back(const_cast<char*>(arg.c_str()));
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0);
  pid_t pid = -1;
  const int result = posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  return result == 0 ? pid : -1;
}

pid_t read_pid(const std::filesystem::path& path) {
  std::ifstream file(path);
  long pid = -1;
  file >> pid;
  return file ? static_cast<pid_t>(pid) : -1;
}

// Reaps every child (the launcher, and ranks it left to this process, which
// is their subreaper) until none is left or `limit` passes.
// This process's children, as "pid command (state)" strings: the test's own
// processes are reaped, while ones other tests started (a PyTorch reference
// server) stay.
std::set<std::string> children() {
  std::set<std::string> found;
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    std::ifstream stat(entry.path() / "stat");
    std::string pid, command, state, ppid;
    if (!(stat >> pid >> command >> state >> ppid) || ppid != std::to_string(::getpid())) continue;
    found.insert(pid + " " + command);
  }
  return found;
}

std::string joined(const std::set<std::string>& items) {
  std::string text;
  for (const std::string& item : items) text += " " + item;
  return text.empty() ? " none" : text;
}

// Reaps every child (and orphaned grandchild) that is not in `keep`; true
// when only those are left within `limit`.
bool reap_all(std::chrono::milliseconds limit, const std::set<std::string>& keep) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < deadline) {
    const pid_t pid = ::waitpid(-1, nullptr, WNOHANG);
    if (pid < 0 && errno == ECHILD) return true;
    if (pid > 0) continue;
    const std::set<std::string> now = children();
    if (std::includes(keep.begin(), keep.end(), now.begin(), now.end())) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return false;
}

// A 2-rank job re-saving every step is killed at random points: kill -9 of
// either rank, of the launcher, or Ctrl-C of the launcher. After each kill,
// the folder must load (on one process) with every tensor holding the same
// step, never an older one than the last load saw.
TEST(ShardedCheckpointFaultTest, KilledWhileSavingTheFolderHoldsOneStep) {
  ASSERT_EQ(::prctl(PR_SET_CHILD_SUBREAPER, 1), 0);
  const std::set<std::string> before = children();
  TempDir dir, pids;
  const std::string folder = (dir.path() / "ckpt").string();
  const std::vector<std::string> job = {
      TESSERA_RUN_PATH,    "-n", "2", "--timeout", "20", TESSERA_CHECKPOINT_WORKER, folder,
      pids.path().string()};
  testing::ScopedEnv timeout("TESSERA_TIMEOUT_S", "5");
  // One more step, saved without interruption; true when the job succeeded.
  auto save_once = [&] {
    std::vector<std::string> once = job;
    once.push_back("1");
    const pid_t pid = spawn(once);
    int status = 0;
    return pid > 0 && ::waitpid(pid, &status, 0) == pid && WIFEXITED(status) &&
           WEXITSTATUS(status) == 0;
  };
  ASSERT_TRUE(save_once()) << "the first save failed";
  auto load_step = [&](int trial) -> double {
    StateDict state;
    state.insert("split_rows", zeros({64, 33}));
    state.insert("uneven", zeros({7, 5}));
    state.insert("split_columns", zeros({9, 40}));
    state.insert("broadcast", zeros({300}));
    state.insert("local_step", zeros({3}, DType::i64));
    std::string message = error_of([&] { global::load_sharded(folder, state); });
    EXPECT_EQ(message, "no error") << "trial " << trial;
    const double step = state.at("local_step").to_vector<double>()[0];
    for (const auto& [key, value] : state) {
      for (double v : value.to_vector<double>()) {
        EXPECT_EQ(v, step) << "trial " << trial << ": '" << key << "' mixes steps";
        if (v != step) return -1;
      }
    }
    return step;
  };

  constexpr int kTrials = 24;
  std::mt19937 random(20261203);
  double last_step = load_step(-1);
  ASSERT_EQ(last_step, 1.0);
  int progressed = 0;
  for (int trial = 0; trial < kTrials; ++trial) {
    for (const auto& item : std::filesystem::directory_iterator(pids.path())) {
      std::filesystem::remove(item.path());
    }
    const pid_t launcher = spawn(job);
    ASSERT_GT(launcher, 0);
    const auto rank_file = [&](int r) {
      return pids.path() / ("rank-" + std::to_string(r) + ".pid");
    };
    const auto started = std::chrono::steady_clock::now();
    while (!(std::filesystem::exists(rank_file(0)) && std::filesystem::exists(rank_file(1))) &&
           std::chrono::steady_clock::now() - started < std::chrono::seconds(20)) {
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    std::this_thread::sleep_for(
        std::chrono::milliseconds(std::uniform_int_distribution<int>(0, 400)(random)));
    const int how = trial % 4;
    if (how < 2) {
      const pid_t rank = read_pid(rank_file(how));
      if (rank > 0) ::kill(rank, SIGKILL);
    } else {
      ::kill(launcher, how == 2 ? SIGKILL : SIGINT);
    }
    // The job ends by itself (the launcher stops the others); whatever is
    // left after a few seconds is killed.
    int status = 0;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(8);
    while (::waitpid(launcher, &status, WNOHANG) == 0 &&
           std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    ::kill(launcher, SIGKILL);
    for (int r : {0, 1}) {
      const pid_t rank = read_pid(rank_file(r));
      if (rank > 0) ::kill(rank, SIGKILL);
    }
    ASSERT_TRUE(reap_all(std::chrono::seconds(10), before))
        << "trial " << trial << ": processes remain:" << joined(children());

    const double step = load_step(trial);
    ASSERT_GE(step, last_step) << "trial " << trial << ": an older checkpoint came back";
    progressed += step > last_step ? 1 : 0;
    last_step = step;
  }
  // The kills did land between saves that completed.
  EXPECT_GT(progressed, 0);
  // A complete save afterwards leaves only the index and this generation's shards.
  ASSERT_TRUE(save_once());
  std::vector<std::string> names;
  for (const auto& item : std::filesystem::directory_iterator(folder)) {
    names.push_back(item.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  ASSERT_EQ(names.size(), 3u);
  EXPECT_EQ(names[0], "index.json");
  EXPECT_TRUE(std::regex_match(names[1], std::regex("shard-0-[0-9a-f]{16}\\.safetensors")));
  EXPECT_TRUE(std::regex_match(names[2], std::regex("shard-1-[0-9a-f]{16}\\.safetensors")));
}
#endif

}  // namespace
}  // namespace tessera
