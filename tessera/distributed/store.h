#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace tessera::distributed {

// A key-value store that the ranks of a job share for rendezvous: each rank
// publishes its address under a key and waits for the others'. Values are
// written once; readers block until a key appears or the timeout passes.
class Store {
 public:
  virtual ~Store() = default;

  // Publishes `value` under `key`, replacing any earlier value.
  virtual void set(const std::string& key, const std::vector<char>& value) = 0;
  // Publishes `value` under `key` only if the key does not exist yet, in one
  // atomic step: of several processes racing for a key exactly one gets
  // true. False when the key was already there (its value is left alone).
  virtual bool create(const std::string& key, const std::vector<char>& value) = 0;
  // The value under `key`, waiting up to timeout() for it to appear.
  virtual std::vector<char> get(const std::string& key) = 0;
  // Blocks until every key exists; throws tessera::Error after `timeout`.
  virtual void wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) = 0;
  // wait() with the store's own timeout.
  void wait(const std::vector<std::string>& keys) { wait(keys, timeout()); }
  // Atomically adds `delta` to the integer counter under `key` (0 when
  // absent) and returns the new value.
  virtual int64_t add(const std::string& key, int64_t delta) = 0;
  // Whether `key` exists now, without waiting.
  virtual bool check(const std::string& key) = 0;
  // How long get() and wait() block before raising.
  virtual std::chrono::milliseconds timeout() const = 0;

 protected:
  // wait() for stores that can only ask check(): polls every 2 ms. The error
  // starts with "[name]" and names the missing keys and `where` ("in '/dir'").
  void poll_until_present(const std::vector<std::string>& keys, std::chrono::milliseconds timeout,
                          const char* name, const std::string& where);
};

}  // namespace tessera::distributed
