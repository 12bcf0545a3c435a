#pragma once

#include <memory>
#include <string>

#include "tessera/distributed/group.h"

namespace tessera::distributed {

// Whether TESSERA_DEBUG_SPMD is set (and not "0"): every rank then checks,
// before each collective, that its peers issue the same one.
bool spmd_check_enabled();

// `group` wrapped so that every collective first compares, across the
// group, its sequence number, name, dtype and shape (dim 0 left out where
// ranks may differ) and the global op running it; the first divergence
// raises "[spmd] ranks diverged: ..." on every rank, naming both sides.
// Splits are wrapped too, so every sub-group is checked. Returns `group`
// itself when spmd_check_enabled() is false. send/recv involve two ranks
// and are not checked (they exchange their layouts anyway).
std::shared_ptr<Group> with_spmd_check(std::shared_ptr<Group> group);

// Names the op that issues collectives on this thread while it lives (the
// global op, or item(), ...), so a divergence message says which op each
// rank was running. Nests; the innermost name wins.
class SpmdScope {
 public:
  explicit SpmdScope(std::string what);
  ~SpmdScope();
  SpmdScope(const SpmdScope&) = delete;
  SpmdScope& operator=(const SpmdScope&) = delete;

 private:
  std::string previous_;
};

}  // namespace tessera::distributed
