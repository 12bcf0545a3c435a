#pragma once

#include <string>

namespace tessera::distributed {

// The engine behind a Group: Gloo (TCP, any launcher) or MPI (ranks started by mpirun).
enum class Backend { gloo, mpi };

// "gloo", "mpi".
const char* backend_name(Backend backend);
// Parses "gloo" or "mpi"; the error names `source` (e.g. "TESSERA_BACKEND") and the valid names.
Backend parse_backend(const std::string& text, const char* source);
// TESSERA_BACKEND when set; otherwise mpi when mpirun started this process
// and the MPI backend is built in, else gloo.
Backend backend_from_env();
// True when mpirun started this process (OMPI_COMM_WORLD_SIZE is set).
bool launched_by_mpirun();
// True when Tessera was built with the MPI backend (TESSERA_WITH_MPI and OpenMPI found).
bool mpi_backend_built();

}  // namespace tessera::distributed
