#include "tessera/distributed/memory_store.h"

#include "tessera/core/error.h"

namespace tessera::distributed {

MemoryStore::MemoryStore(std::chrono::milliseconds timeout) : timeout_(timeout) {
  TESSERA_CHECK(timeout_.count() > 0, "[MemoryStore] timeout must be positive, got ",
                timeout_.count(), " ms");
}

void MemoryStore::set(const std::string& key, const std::vector<char>& value) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    values_[key] = value;
  }
  changed_.notify_all();
}

bool MemoryStore::create(const std::string& key, const std::vector<char>& value) {
  bool created = false;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    created = values_.emplace(key, value).second;
  }
  if (created) changed_.notify_all();
  return created;
}

std::vector<char> MemoryStore::get(const std::string& key) {
  wait({key}, timeout_);
  std::lock_guard<std::mutex> lock(mutex_);
  return values_.at(key);
}

void MemoryStore::wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mutex_);
  auto all_present = [&] {
    for (const std::string& key : keys)
      if (values_.count(key) == 0) return false;
    return true;
  };
  if (changed_.wait_for(lock, timeout, all_present)) return;
  std::string missing;
  for (const std::string& key : keys)
    if (values_.count(key) == 0) missing += (missing.empty() ? "'" : ", '") + key + "'";
  TESSERA_FAIL("[MemoryStore] timed out after ", timeout.count(), " ms waiting for key(s) ",
               missing, " (a lone process's store: only this process can set them)");
}

int64_t MemoryStore::add(const std::string& key, int64_t delta) {
  int64_t value = 0;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    std::vector<char>& bytes = values_[key];
    if (!bytes.empty()) value = std::stoll(std::string(bytes.begin(), bytes.end()));
    TESSERA_CHECK(!__builtin_add_overflow(value, delta, &value), "[MemoryStore] add: key '", key,
                  "' would overflow int64 (", value, " + ", delta, ")");
    const std::string text = std::to_string(value);
    bytes.assign(text.begin(), text.end());
  }
  changed_.notify_all();
  return value;
}

bool MemoryStore::check(const std::string& key) {
  std::lock_guard<std::mutex> lock(mutex_);
  return values_.count(key) != 0;
}

}  // namespace tessera::distributed
