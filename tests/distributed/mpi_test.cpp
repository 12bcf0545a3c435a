// The MPI backend: collectives_worker started by mpirun on 2-4 ranks (the
// same checks as the Gloo runs), failure handling under mpirun, and the
// backend choice in init_process_group.

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

#include "tessera/distributed/group.h"
#include "testing.h"

namespace tessera::distributed {
namespace {

using tessera::testing::ScopedEnv;

using tessera::testing::error_of;

// mpirun as found at configure time, else on PATH; empty when there is none.
std::string find_mpirun() {
#ifdef TESSERA_MPIEXEC
  if (std::filesystem::exists(TESSERA_MPIEXEC)) return TESSERA_MPIEXEC;
#endif
  const char* path = std::getenv("PATH");
  std::stringstream dirs(path ? path : "");
  for (std::string dir; std::getline(dirs, dir, ':');) {
    const std::filesystem::path candidate = std::filesystem::path(dir) / "mpirun";
    if (!dir.empty() && ::access(candidate.c_str(), X_OK) == 0) return candidate.string();
  }
  return "";
}

struct MpirunResult {
  int status;  // mpirun's exit status; -1 when killed
  std::string output;
  std::chrono::duration<double> elapsed;
};

// Runs `ranks` collectives_workers in `mode` under mpirun with `env` (NAME=value words)
// added; the job is killed after 60 s. Options that make mpirun work in a container:
// running as root, more ranks than cores, shared memory only, no process binding,
// and no single-copy (CMA) transfers, which need ptrace rights containers often lack.
MpirunResult mpirun(const std::string& mpirun_path, int ranks, const std::string& mode,
                    const std::string& env) {
  // OpenMPI's plugins leak and are unloaded at MPI_Finalize, so LeakSanitizer
  // reports (and cannot attribute) their blocks; address errors are still caught.
  // (Harmless without AddressSanitizer.)
  const char* asan = std::getenv("ASAN_OPTIONS");
  const std::string leak_option =
      " 'ASAN_OPTIONS=" + std::string(asan ? asan : "") + (asan ? ":" : "") + "detect_leaks=0'";
  const std::filesystem::path log = std::filesystem::temp_directory_path() /
                                    ("tessera_mpi_test_" + std::to_string(::getpid()) + ".log");
  const std::string command =
      "env -u RANK -u WORLD_SIZE -u LOCAL_RANK -u LOCAL_WORLD_SIZE -u TESSERA_RDZV "
      "-u TESSERA_BACKEND -u TESSERA_TIMEOUT_S " +
      env + leak_option + " timeout -k 5 60 " + mpirun_path + " -n " + std::to_string(ranks) +
      " --allow-run-as-root --oversubscribe --bind-to none --mca btl self,vader"
      " --mca btl_vader_single_copy_mechanism none " +
      TESSERA_COLLECTIVES_WORKER + " " + mode;
  const auto start = std::chrono::steady_clock::now();
  const int raw = std::system((command + " > " + log.string() + " 2>&1").c_str());
  const auto elapsed = std::chrono::steady_clock::now() - start;
  std::ifstream file(log);
  std::stringstream text;
  text << file.rdbuf();
  std::filesystem::remove(log);
  return {WIFEXITED(raw) ? WEXITSTATUS(raw) : -1, text.str(), elapsed};
}

// Skips the test unless the MPI backend is built and mpirun exists.
#define TESSERA_REQUIRE_MPIRUN(path)                                                     \
  if (!mpi_backend_built()) GTEST_SKIP() << "Tessera was built without the MPI backend"; \
  const std::string path = find_mpirun();                                                \
  if (path.empty()) GTEST_SKIP() << "mpirun not found (Debian: openmpi-bin)"

class MpiCollectivesTest : public ::testing::TestWithParam<int> {};

TEST_P(MpiCollectivesTest, EveryCollectiveMatchesLocalReference) {
  TESSERA_REQUIRE_MPIRUN(path);
  MpirunResult result = mpirun(path, GetParam(), "all", "TESSERA_TIMEOUT_S=30");
  EXPECT_EQ(result.status, 0) << result.output;
}

INSTANTIATE_TEST_SUITE_P(WorldSizes, MpiCollectivesTest, ::testing::Values(2, 3, 4));

TEST(MpiBackendTest, MpirunPicksMpiUnlessTold) {
  TESSERA_REQUIRE_MPIRUN(path);
  MpirunResult chosen = mpirun(path, 2, "which", "");
  EXPECT_EQ(chosen.status, 0) << chosen.output;
  EXPECT_NE(chosen.output.find("rank 1 of 2: N7tessera11distributed8MpiGroupE"), std::string::npos)
      << chosen.output;
  MpirunResult told = mpirun(path, 2, "which", "TESSERA_BACKEND=mpi");
  EXPECT_EQ(told.status, 0) << told.output;
  EXPECT_NE(told.output.find("rank 0 of 2: N7tessera11distributed8MpiGroupE"), std::string::npos)
      << told.output;
  // Gloo under mpirun: ranks from OMPI_COMM_WORLD_*, rendezvous through the folder.
  std::string folder =
      (std::filesystem::temp_directory_path() / "tessera-mpi-gloo-XXXXXX").string();
  ASSERT_NE(::mkdtemp(folder.data()), nullptr);
  MpirunResult gloo =
      mpirun(path, 2, "which", "TESSERA_BACKEND=gloo TESSERA_RDZV=file://" + folder + "/rdzv");
  std::filesystem::remove_all(folder);
  EXPECT_EQ(gloo.status, 0) << gloo.output;
  EXPECT_NE(gloo.output.find("rank 1 of 2: N7tessera11distributed9GlooGroupE"), std::string::npos)
      << gloo.output;
}

TEST(MpiBackendTest, BadBackendNameFailsEveryRank) {
  TESSERA_REQUIRE_MPIRUN(path);
  MpirunResult result = mpirun(path, 2, "which", "TESSERA_BACKEND=openmpi");
  EXPECT_NE(result.status, 0) << result.output;
  EXPECT_NE(result.output.find("TESSERA_BACKEND='openmpi' is not a backend; valid: gloo, mpi"),
            std::string::npos)
      << result.output;
}

TEST(MpiFailureTest, StalledPeerTimesOutTheOthers) {
  TESSERA_REQUIRE_MPIRUN(path);
  // The last of 3 ranks sleeps 2.5 s; the others give up after their 1 s
  // timeout, exit, and mpirun stops the job.
  MpirunResult result = mpirun(path, 3, "stall", "TESSERA_TIMEOUT_S=1");
  EXPECT_NE(result.status, 0) << result.output;
  const bool named =
      result.output.find("[all_reduce] rank 0 of 3 timed out after 1000 ms") != std::string::npos ||
      result.output.find("[all_reduce] rank 1 of 3 timed out after 1000 ms") != std::string::npos;
  EXPECT_TRUE(named) << result.output;
  EXPECT_LT(result.elapsed, std::chrono::seconds(15));
}

TEST(MpiFailureTest, LostPeerEndsTheJob) {
  TESSERA_REQUIRE_MPIRUN(path);
  // The last rank exits with status 3 before an all_reduce; mpirun stops the
  // others (long before their 20 s timeout) and reports the rank that left.
  MpirunResult result = mpirun(path, 3, "die_early", "TESSERA_TIMEOUT_S=20");
  EXPECT_NE(result.status, 0) << result.output;
  EXPECT_NE(result.output.find("Exit code:    3"), std::string::npos) << result.output;
  EXPECT_NE(result.output.find(",1],2]"), std::string::npos) << result.output;  // [[job,1],rank]
  EXPECT_LT(result.elapsed, std::chrono::seconds(15));
}

TEST(MpiFailureTest, PeerLeavingWithStatusZeroIsNamedAtOnce) {
  TESSERA_REQUIRE_MPIRUN(path);
  // The last rank's program ends normally before an all_reduce the others
  // enter: mpirun does not stop the job for it, and MPI_Finalize waits for
  // the others, so without its announcement they would wait out the 20 s.
  MpirunResult result = mpirun(path, 3, "leave_early", "TESSERA_TIMEOUT_S=20");
  EXPECT_NE(result.status, 0) << result.output;
  // The message is the one of the announcement path: a survivor that waited
  // out its 20 s timeout says "timed out" instead. How long mpirun then
  // takes to tear the job down is OpenMPI's, and is not asserted.
  for (int rank : {0, 1}) {
    EXPECT_NE(result.output.find("[all_reduce] rank " + std::to_string(rank) +
                                 " of 3 lost rank 2 (its program ended)"),
              std::string::npos)
        << result.output;
  }
  EXPECT_EQ(result.output.find("timed out"), std::string::npos) << result.output;
}

TEST(BackendSelectionTest, DefaultsAndNames) {
  ScopedEnv no_backend("TESSERA_BACKEND", std::nullopt);
  {
    ScopedEnv no_mpirun("OMPI_COMM_WORLD_SIZE", std::nullopt);
    EXPECT_EQ(backend_from_env(), Backend::gloo);
  }
  {
    ScopedEnv under_mpirun("OMPI_COMM_WORLD_SIZE", "2");
    EXPECT_EQ(backend_from_env(), mpi_backend_built() ? Backend::mpi : Backend::gloo);
    ScopedEnv told("TESSERA_BACKEND", "gloo");
    EXPECT_EQ(backend_from_env(), Backend::gloo);
  }
  EXPECT_EQ(parse_backend("mpi", "test"), Backend::mpi);
  EXPECT_STREQ(backend_name(Backend::mpi), "mpi");
  EXPECT_STREQ(backend_name(Backend::gloo), "gloo");
  ScopedEnv bad("TESSERA_BACKEND", "ucc");
  EXPECT_EQ(error_of([] { backend_from_env(); }),
            "[init_process_group] TESSERA_BACKEND='ucc' is not a backend; valid: gloo, mpi, nccl");
  EXPECT_NE(error_of([] { init_process_group(); }).find("TESSERA_BACKEND='ucc'"),
            std::string::npos);
}

TEST(BackendSelectionTest, MpiOutsideMpirunIsAClearError) {
  ScopedEnv no_mpirun("OMPI_COMM_WORLD_SIZE", std::nullopt);
  Environment env;
  const std::string message = error_of([&] { init_process_group(env, Backend::mpi); });
  if (mpi_backend_built()) {
    EXPECT_NE(message.find("needs ranks started by mpirun"), std::string::npos) << message;
  } else {
    EXPECT_NE(message.find("not built into this Tessera"), std::string::npos) << message;
  }
  ScopedEnv told("TESSERA_BACKEND", "mpi");
  EXPECT_EQ(error_of([] { init_process_group(); }), message);
}

TEST(BackendSelectionTest, TimeoutFromEnv) {
  {
    ScopedEnv unset("TESSERA_TIMEOUT_S", std::nullopt);
    EXPECT_EQ(timeout_from_env(), std::chrono::seconds(60));
  }
  {
    ScopedEnv half("TESSERA_TIMEOUT_S", "0.5");
    EXPECT_EQ(timeout_from_env(), std::chrono::milliseconds(500));
  }
  ScopedEnv bad("TESSERA_TIMEOUT_S", "-3");
  EXPECT_NE(error_of([] { timeout_from_env(); }).find("TESSERA_TIMEOUT_S='-3'"), std::string::npos);
}

}  // namespace
}  // namespace tessera::distributed
