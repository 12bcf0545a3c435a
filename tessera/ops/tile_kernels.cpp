#include "tessera/ops/tile_kernels.h"

#include <map>
#include <mutex>
#include <string>

#include "tessera/core/error.h"

namespace tessera {

namespace {

struct Registry {
  std::mutex mutex;
  std::map<std::string, TileKernel, std::less<>> kernels;
  ChainKernel chain;
};

Registry& registry() {
  static Registry instance;
  return instance;
}

}  // namespace

bool register_tile_kernel(std::string_view op, TileKernel kernel) {
  TESSERA_CHECK(kernel != nullptr, "[tile_kernels] ", op, " needs a kernel");
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  TESSERA_CHECK(r.kernels.emplace(std::string(op), kernel).second, "[tile_kernels] ", op,
                " has a tile kernel already");
  return true;
}

TileKernel tile_kernel(std::string_view op) {
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  auto it = r.kernels.find(op);
  return it == r.kernels.end() ? nullptr : it->second;
}

bool register_chain_kernel(ChainKernel kernel) {
  TESSERA_CHECK(kernel.op != nullptr && kernel.run != nullptr,
                "[tile_kernels] a chain kernel needs its op lookup and its run");
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  TESSERA_CHECK(r.chain.op == nullptr, "[tile_kernels] a chain kernel is registered already");
  r.chain = kernel;
  return true;
}

ChainKernel chain_kernel() {
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  return r.chain;
}

}  // namespace tessera
