#pragma once

#include <chrono>
#include <string>

namespace tessera::distributed {

// Where this process sits in a job, as the launcher describes it through
// environment variables (tessera-run, mpirun or Slurm).
struct Environment {
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
  int local_world_size = 1;
  // Rendezvous URL: "file:///abs/dir" (FileStore) or, later, "redis://host:port".
  std::string rendezvous;
  // Every collective and the rendezvous give up after this long.
  std::chrono::milliseconds timeout = std::chrono::seconds(60);

  // Reads RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, TESSERA_RDZV and
  // TESSERA_TIMEOUT_S; falls back to OMPI_COMM_WORLD_* and SLURM_* for the
  // ranks. Errors name the variable and its value.
  static Environment from_env();
};

// TESSERA_TIMEOUT_S in milliseconds (60 s when unset); the error names the
// variable and its value. The MPI backend reads only this, since it needs
// no rendezvous.
std::chrono::milliseconds timeout_from_env();

}  // namespace tessera::distributed
