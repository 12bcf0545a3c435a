#include "tessera/global/process_groups.h"

#include <map>
#include <mutex>

#include "tessera/core/error.h"

namespace tessera::global {

namespace {

struct Cache {
  std::mutex mutex;
  const distributed::Group* world = nullptr;
  std::map<std::vector<int>, std::shared_ptr<distributed::Group>> groups;
  std::map<std::vector<int>, std::shared_ptr<distributed::Group>> gradient_groups;
};

thread_local bool gradient_groups_on = false;

Cache& cache() {
  static auto* instance = new Cache();
  return *instance;
}

}  // namespace

int world_rank() { return distributed::default_group()->rank(); }

std::shared_ptr<distributed::Group> group_of(const std::vector<int>& ranks) {
  std::shared_ptr<distributed::Group> world = distributed::default_group();
  Cache& c = cache();
  std::lock_guard<std::mutex> lock(c.mutex);
  if (c.world != world.get()) {  // a new default group: old sub-groups are stale
    c.groups.clear();
    c.gradient_groups.clear();
    c.world = world.get();
  }
  bool whole = static_cast<int>(ranks.size()) == world->size();
  for (size_t i = 0; whole && i < ranks.size(); ++i) whole = ranks[i] == static_cast<int>(i);
  if (gradient_groups_on) {
    auto& slot = c.gradient_groups[ranks];
    if (!slot) slot = world->split(ranks);
    return slot;
  }
  if (whole) return world;
  for (int rank : ranks) {
    TESSERA_CHECK(rank < world->size(), "[placement] rank ", rank, " is outside the ",
                  world->size(), " processes of this job");
  }
  auto& slot = c.groups[ranks];
  if (!slot) slot = world->split(ranks);
  return slot;
}

void use_gradient_groups(bool on) { gradient_groups_on = on; }
bool using_gradient_groups() { return gradient_groups_on; }

std::vector<int> axis_ranks(const Placement& placement, int index, int axis) {
  std::vector<int64_t> coord = placement.coordinate(index);
  std::vector<int> ranks;
  for (int64_t i = 0; i < placement.mesh()[static_cast<size_t>(axis)]; ++i) {
    coord[static_cast<size_t>(axis)] = i;
    ranks.push_back(placement.ranks()[static_cast<size_t>(placement.index_at(coord))]);
  }
  return ranks;
}

}  // namespace tessera::global
