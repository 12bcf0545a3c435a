#include "tessera/distributed/environment.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <map>
#include <optional>
#include <string>

#include "testing.h"

namespace tessera::distributed {
namespace {

using tessera::testing::error_of;

const char* const kVariables[] = {"RANK",
                                  "WORLD_SIZE",
                                  "LOCAL_RANK",
                                  "LOCAL_WORLD_SIZE",
                                  "TESSERA_RDZV",
                                  "TESSERA_TIMEOUT_S",
                                  "OMPI_COMM_WORLD_RANK",
                                  "OMPI_COMM_WORLD_SIZE",
                                  "OMPI_COMM_WORLD_LOCAL_RANK",
                                  "OMPI_COMM_WORLD_LOCAL_SIZE",
                                  "SLURM_PROCID",
                                  "SLURM_NTASKS",
                                  "SLURM_LOCALID",
                                  "SLURM_NTASKS_PER_NODE",
                                  "SLURM_TASKS_PER_NODE",
                                  "SLURM_NNODES",
                                  "SLURM_NODEID",
                                  "MASTER_ADDR",
                                  "MASTER_PORT"};

// Clears the launcher variables for one test and restores them afterwards.
class EnvironmentTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* name : kVariables) {
      if (const char* value = std::getenv(name)) saved_[name] = value;
      ::unsetenv(name);
    }
  }
  void TearDown() override {
    for (const char* name : kVariables) ::unsetenv(name);
    for (const auto& [name, value] : saved_) ::setenv(name.c_str(), value.c_str(), 1);
  }
  static void set(const char* name, const char* value) { ::setenv(name, value, 1); }
  std::map<std::string, std::string> saved_;
};

TEST_F(EnvironmentTest, ReadsTheTesseraContract) {
  set("RANK", "2");
  set("WORLD_SIZE", "4");
  set("LOCAL_RANK", "0");
  set("LOCAL_WORLD_SIZE", "2");
  set("TESSERA_RDZV", "file:///tmp/rdzv");
  set("TESSERA_TIMEOUT_S", "2.5");
  Environment env = Environment::from_env();
  EXPECT_EQ(env.rank, 2);
  EXPECT_EQ(env.world_size, 4);
  EXPECT_EQ(env.local_rank, 0);
  EXPECT_EQ(env.local_world_size, 2);
  EXPECT_EQ(env.rendezvous, "file:///tmp/rdzv");
  EXPECT_EQ(env.timeout.count(), 2500);
}

TEST_F(EnvironmentTest, DefaultsToOneProcessAndSixtySeconds) {
  Environment env = Environment::from_env();
  EXPECT_EQ(env.rank, 0);
  EXPECT_EQ(env.world_size, 1);
  EXPECT_EQ(env.local_world_size, 1);
  EXPECT_EQ(env.rendezvous, "");
  EXPECT_EQ(env.timeout.count(), 60000);
}

TEST_F(EnvironmentTest, FallsBackToMpiAndSlurm) {
  set("OMPI_COMM_WORLD_RANK", "1");
  set("OMPI_COMM_WORLD_SIZE", "3");
  set("TESSERA_RDZV", "file:///tmp/x");
  Environment mpi = Environment::from_env();
  EXPECT_EQ(mpi.rank, 1);
  EXPECT_EQ(mpi.world_size, 3);
  EXPECT_EQ(mpi.local_rank, 1);  // one machine assumed without local values
  ::unsetenv("OMPI_COMM_WORLD_RANK");
  set("SLURM_PROCID", "5");
  set("SLURM_NTASKS", "8");
  set("SLURM_LOCALID", "1");
  set("SLURM_NTASKS_PER_NODE", "4");
  Environment slurm = Environment::from_env();
  EXPECT_EQ(slurm.rank, 5);
  EXPECT_EQ(slurm.world_size, 8);
  EXPECT_EQ(slurm.local_rank, 1);
  EXPECT_EQ(slurm.local_world_size, 4);
}

TEST_F(EnvironmentTest, SlurmWithoutNtasksPerNodeCountsTheNodes) {
  set("SLURM_PROCID", "5");
  set("SLURM_NTASKS", "8");
  set("SLURM_LOCALID", "1");
  set("TESSERA_RDZV", "redis://head:6379/job");
  set("SLURM_NNODES", "2");
  EXPECT_EQ(Environment::from_env().local_world_size, 4);  // not taken for one machine
  set("SLURM_TASKS_PER_NODE", "3(x2),2");
  set("SLURM_NODEID", "2");
  Environment env = Environment::from_env();
  EXPECT_EQ(env.local_world_size, 2);
  EXPECT_EQ(env.local_rank, 1);
  set("SLURM_NODEID", "0");
  EXPECT_EQ(Environment::from_env().local_world_size, 3);
  set("SLURM_NODEID", "3");
  EXPECT_NE(error_of([] { Environment::from_env(); }).find("SLURM_NODEID=3 is outside [0, 3)"),
            std::string::npos);
  set("SLURM_TASKS_PER_NODE", "3(x2");
  EXPECT_NE(error_of([] { Environment::from_env(); }).find("SLURM_TASKS_PER_NODE='3(x2'"),
            std::string::npos);
  set("SLURM_NTASKS_PER_NODE", "4");  // given explicitly: used as is
  EXPECT_EQ(Environment::from_env().local_world_size, 4);
  ::unsetenv("SLURM_NTASKS_PER_NODE");
  ::unsetenv("SLURM_TASKS_PER_NODE");
  set("SLURM_NNODES", "1");
  EXPECT_EQ(Environment::from_env().local_world_size, 8);
}

TEST_F(EnvironmentTest, ErrorsNameTheVariableAndValue) {
  set("RANK", "x1");
  set("WORLD_SIZE", "2");
  EXPECT_NE(error_of([] { Environment::from_env(); }).find("RANK='x1' is not an integer"),
            std::string::npos);
  set("RANK", "2");
  EXPECT_NE(error_of([] { Environment::from_env(); }).find("RANK=2 is outside [0, 2)"),
            std::string::npos);
  set("RANK", "1");
  EXPECT_NE(error_of([] { Environment::from_env(); }).find("TESSERA_RDZV is not set"),
            std::string::npos);
  set("MASTER_ADDR", "10.0.0.1");
  EXPECT_NE(error_of([] { Environment::from_env(); }).find("not supported yet"), std::string::npos);
  set("TESSERA_RDZV", "file://relative/dir");
  EXPECT_NE(error_of([] { Environment::from_env(); }).find("absolute path"), std::string::npos);
  set("TESSERA_RDZV", "tcp://host:1");
  EXPECT_NE(error_of([] { Environment::from_env(); }).find("unknown scheme"), std::string::npos);
  set("TESSERA_RDZV", "redis://host:99999");
  EXPECT_NE(error_of([] { Environment::from_env(); }).find("port '99999'"), std::string::npos);
  set("TESSERA_RDZV", "redis://host:6379/job/x");
  EXPECT_NE(error_of([] { Environment::from_env(); }).find("job name 'job/x'"), std::string::npos);
  set("TESSERA_RDZV", "redis://host:6379");
  EXPECT_EQ(Environment::from_env().rendezvous, "redis://host:6379");
  set("TESSERA_RDZV", "redis://10.0.0.2:6379/run-7");
  EXPECT_EQ(Environment::from_env().rendezvous, "redis://10.0.0.2:6379/run-7");
  set("TESSERA_TIMEOUT_S", "-1");
  EXPECT_NE(error_of([] { Environment::from_env(); }).find("TESSERA_TIMEOUT_S='-1'"),
            std::string::npos);
  ::unsetenv("TESSERA_TIMEOUT_S");
  set("LOCAL_WORLD_SIZE", "3");
  EXPECT_NE(error_of([] { Environment::from_env(); }).find("LOCAL_WORLD_SIZE=3"),
            std::string::npos);
  ::unsetenv("RANK");
  EXPECT_NE(error_of([] { Environment::from_env(); }).find("WORLD_SIZE is set but RANK is not"),
            std::string::npos);
}

}  // namespace
}  // namespace tessera::distributed
