#pragma once

#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <string>

#include "tessera/distributed/store.h"

namespace tessera::distributed {

// A Store inside one process: what a lone process rendezvouses with, so it
// needs no folder (and leaves none behind). Keys vanish with the store.
class MemoryStore : public Store {
 public:
  explicit MemoryStore(std::chrono::milliseconds timeout = std::chrono::seconds(60));

  void set(const std::string& key, const std::vector<char>& value) override;
  bool create(const std::string& key, const std::vector<char>& value) override;
  // The value, waiting up to timeout() for another thread to set it.
  std::vector<char> get(const std::string& key) override;
  void wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) override;
  using Store::wait;
  int64_t add(const std::string& key, int64_t delta) override;
  bool check(const std::string& key) override;
  std::chrono::milliseconds timeout() const override { return timeout_; }

 private:
  std::chrono::milliseconds timeout_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::map<std::string, std::vector<char>> values_;
};

}  // namespace tessera::distributed
