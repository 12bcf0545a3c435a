#include "tessera/distributed/backend.h"

#include <cstdlib>
#include <string>

#include "tessera/core/error.h"

namespace tessera::distributed {

const char* backend_name(Backend backend) {
  switch (backend) {
    case Backend::gloo:
      return "gloo";
    case Backend::mpi:
      return "mpi";
    case Backend::nccl:
      return "nccl";
  }
  return "unknown";
}

Backend parse_backend(const std::string& text, const char* source) {
  if (text == "gloo") return Backend::gloo;
  if (text == "mpi") return Backend::mpi;
  if (text == "nccl") return Backend::nccl;
  TESSERA_FAIL("[init_process_group] ", source, "='", text,
               "' is not a backend; valid: gloo, mpi, nccl");
}

bool mpi_backend_built() {
#ifdef TESSERA_HAVE_MPI
  return true;
#else
  return false;
#endif
}

bool nccl_backend_built() {
#ifdef TESSERA_HAVE_NCCL
  return true;
#else
  return false;
#endif
}

bool launched_by_mpirun() {
  return std::getenv("OMPI_COMM_WORLD_SIZE") != nullptr;
}

Backend backend_from_env() {
  if (const char* text = std::getenv("TESSERA_BACKEND")) {
    return parse_backend(text, "TESSERA_BACKEND");
  }
  return launched_by_mpirun() && mpi_backend_built() ? Backend::mpi : Backend::gloo;
}

}  // namespace tessera::distributed
