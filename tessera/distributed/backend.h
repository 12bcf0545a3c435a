#pragma once

#include <string>

namespace tessera::distributed {

// The engine behind a Group: Gloo (TCP, any launcher), MPI (ranks started
// by mpirun) or NCCL (CUDA devices, one per rank).
enum class Backend { gloo, mpi, nccl };

// "gloo", "mpi", "nccl".
const char* backend_name(Backend backend);
// Parses "gloo", "mpi" or "nccl"; the error names `source` (e.g.
// "TESSERA_BACKEND") and the valid names.
Backend parse_backend(const std::string& text, const char* source);
// TESSERA_BACKEND when set; otherwise mpi when mpirun started this process
// and the MPI backend is built in, else gloo.
Backend backend_from_env();
// True when mpirun started this process (OMPI_COMM_WORLD_SIZE is set).
bool launched_by_mpirun();
// True when Tessera was built with the MPI backend (TESSERA_WITH_MPI and OpenMPI found).
bool mpi_backend_built();
// True when Tessera was built with CUDA and NCCL (TESSERA_WITH_CUDA, both found).
bool nccl_backend_built();

}  // namespace tessera::distributed
