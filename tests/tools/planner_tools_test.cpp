// tessera-plan and tessera-calibrate as a user runs them: a described GPT
// planned for a declared profile, a profile measured and read back, and
// clear usage errors.
#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "tessera/global/cost_model.h"
#include "testing.h"

namespace tessera::testing {
namespace {

namespace fs = std::filesystem;

struct Outcome {
  int status = -1;
  std::string output;  // stdout and stderr
};

Outcome run(const std::string& command) {
  Outcome result;
  std::FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  if (pipe == nullptr) return result;
  char buffer[4096];
  size_t count = 0;
  while ((count = std::fread(buffer, 1, sizeof buffer, pipe)) > 0)
    result.output.append(buffer, count);
  const int raw = pclose(pipe);
  result.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
  return result;
}

const std::string kPlan = TESSERA_PLAN_PATH;
const std::string kCalibrate = TESSERA_CALIBRATE_PATH;
const std::string kProfiles = std::string(TESSERA_SOURCE_DIR) + "/profiles/";

TEST(TesseraPlan, PlansADescribedGptForADeclaredProfile) {
  const fs::path folder = fs::temp_directory_path() / ("tessera_plan_" + std::to_string(getpid()));
  fs::create_directories(folder);
  const Outcome result =
      run(kPlan + " --profile " + kProfiles + "dgx_h100.json --mesh 2x4" +
          " --layers 2 --d-model 512 --heads 8 --vocab 1000 --sequence 256" +
          " --batch 16 --dtype bf16 --optimizer-states 6 --save " +
          (folder / "plan.json").string() + " --dot " + (folder / "plan.dot").string());
  EXPECT_EQ(result.status, 0) << result.output;
  for (const char* part :
       {"model: GPT of", "profile: DGX H100", "mesh: cpu:[0, 1, 2, 3, 4, 5, 6, 7] as [2, 4]",
        "predicted step:", "MFU", "predicted memory per rank:", "(device: 80 GiB)"}) {
    EXPECT_HAS(result.output, part);
  }
  std::ifstream saved(folder / "plan.json");
  std::stringstream text;
  text << saved.rdbuf();
  EXPECT_HAS(text.str(), "\"blocks.1.linear2.weight\"");
  EXPECT_TRUE(fs::exists(folder / "plan.dot"));
  fs::remove_all(folder);
}

TEST(TesseraPlan, SaysWhatIsWrongWithItsArguments) {
  struct Case {
    const char* arguments;
    int status;  // 2: usage, 1: a planner or profile error
    const char* message;
  };
  for (const Case& c : std::vector<Case>{
           {"--layers 2", 2, "--mesh is required"},
           {"--mesh 2x2x2", 2, "1-D or 2-D"},
           {"--mesh 2 --heads 3 --d-model 8", 1, "heads (3) must divide d_model (8)"},
           {"--mesh 2 --profile /nonexistent/profile.json", 1, "/nonexistent/profile.json"},
           {"--mesh 2 --pin w=Q", 1, "'Q' is not a layout"},
           {"--mesh 2 --pipeline 2 --save plan.json", 2, "are not taken"},
           {"--mesh 2 --micro-batch 2", 2, "go with --pipeline"},
           {"--mesh 2 --pipeline 3 --layers 4", 1, "3 stages of 1 chunk(s) do not divide"},
           {"--mesh 2 --layers 1 --d-model 64 --heads 2 --vocab 64 --sequence 16 --batch 4 "
            "--memory-budget-gib 0.000001",
            1, "Give a budget of at least"}}) {
    const Outcome result = run(kPlan + " " + c.arguments);
    EXPECT_EQ(result.status, c.status) << c.arguments << "\n" << result.output;
    EXPECT_HAS(result.output, c.message);
  }
}

TEST(TesseraCalibrate, WritesAProfileTheCostModelReads) {
  const fs::path out =
      fs::temp_directory_path() / ("tessera_profile_" + std::to_string(getpid()) + ".json");
  const Outcome result = run(kCalibrate + " --quick --repetitions 2 --out " + out.string());
  ASSERT_EQ(result.status, 0) << result.output;
  const global::CostModel model = global::CostModel::from_file(out.string());
  EXPECT_HAS(model.name, "this machine, 1 rank");
  EXPECT_GT(model.compute(OpKind::matmul).flops_per_second, 1e8);
  EXPECT_GT(model.compute().bytes_per_second, 1e8);
  EXPECT_GT(model.memory_bytes, 0);
  fs::remove(out);
  EXPECT_EQ(run(kCalibrate + " --repetitions 0").status, 2);
}

#ifdef TESSERA_RUN_PATH
// On two ranks the profile has links: one fit for every collective, and
// one of each kind's own.
TEST(TesseraCalibrate, FitsEachCollectiveOnTwoRanks) {
  const fs::path out =
      fs::temp_directory_path() / ("tessera_profile2_" + std::to_string(getpid()) + ".json");
  const Outcome result = run(std::string(TESSERA_RUN_PATH) + " -n 2 " + kCalibrate +
                             " --quick --repetitions 2 --out " + out.string());
  ASSERT_EQ(result.status, 0) << result.output;
  const global::CostModel model = global::CostModel::from_file(out.string());
  fs::remove(out);
  EXPECT_HAS(model.name, "this machine, 2 ranks");
  const std::string text = model.to_json();
  for (const char* kind :
       {"\"all_reduce\"", "\"all_gather\"", "\"reduce_scatter\"", "\"all_to_all\""}) {
    EXPECT_HAS(text, std::string("\"collective\": ") + kind);
  }
  for (global::Collective kind :
       {global::Collective::all_reduce, global::Collective::all_gather,
        global::Collective::reduce_scatter, global::Collective::all_to_all}) {
    EXPECT_GT(model.link(2, 2, kind).seconds_per_byte, 0) << global::collective_key(kind);
  }
}
#endif

}  // namespace
}  // namespace tessera::testing
