#include "tessera/distributed/store.h"

#include <thread>

#include "tessera/core/error.h"

namespace tessera::distributed {

void Store::poll_until_present(const std::vector<std::string>& keys,
                               std::chrono::milliseconds timeout, const char* name,
                               const std::string& where) {
  using Clock = std::chrono::steady_clock;
  // Short enough that rendezvous of a few ranks takes milliseconds, long
  // enough that waiting ranks do not compete with working ones for the CPU
  // (or flood a Redis server).
  constexpr auto kPollInterval = std::chrono::milliseconds(2);
  const auto start = Clock::now();
  size_t next = 0;  // keys before `next` are known to exist
  while (next < keys.size()) {
    if (check(keys[next])) {
      ++next;
      continue;
    }
    const auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start);
    if (waited >= timeout) {
      std::string missing;
      for (size_t i = next; i < keys.size(); ++i) {
        if (check(keys[i])) continue;
        missing += (missing.empty() ? "'" : ", '") + keys[i] + "'";
      }
      TESSERA_FAIL("[", name, "] timed out after ", waited.count(), " ms waiting for key(s) ",
                   missing, " ", where, " (timeout ", timeout.count(), " ms)");
    }
    std::this_thread::sleep_for(kPollInterval);
  }
}

}  // namespace tessera::distributed
