#pragma once

#include <chrono>
#include <mutex>
#include <string>

#include "tessera/distributed/store.h"

struct redisContext;

namespace tessera::distributed {

// The parts of a rendezvous URL "redis://host:port[/job]".
struct RedisUrl {
  std::string host;
  int port = 0;
  std::string job;  // names the job's key space; empty: none given

  // Parses the URL; errors name it and show the valid form.
  static RedisUrl parse(const std::string& url);
  // Where a job's keys live: "tessera/<job>/" ("tessera/" without a job).
  std::string key_prefix() const { return job.empty() ? "tessera/" : "tessera/" + job + "/"; }
};

// A Store on a Redis server, for ranks on several machines
// (TESSERA_RDZV=redis://host:port/job). Every key lives under `prefix`
// (init_process_group uses "tessera/<job>/"), so jobs sharing a server never
// see each other's keys. One connection per store, serialised by a mutex;
// readers poll with short sleeps; add() is Redis's atomic INCRBY.
class RedisStore : public Store {
 public:
  // Connects to host:port; get()/wait() give up after `timeout`, and so does
  // any single command whose server stops answering.
  RedisStore(std::string host, int port, std::string prefix,
             std::chrono::milliseconds timeout = std::chrono::seconds(60));
  ~RedisStore() override;
  RedisStore(const RedisStore&) = delete;
  RedisStore& operator=(const RedisStore&) = delete;

  // SET, replacing any earlier value.
  void set(const std::string& key, const std::vector<char>& value) override;
  // SET NX: atomic across every client of the server.
  bool create(const std::string& key, const std::vector<char>& value) override;
  // GET, polling until the key exists or the timeout passes.
  std::vector<char> get(const std::string& key) override;
  // Polls until every key exists; the error names the missing keys and the time waited.
  void wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) override;
  using Store::wait;
  // INCRBY: atomic across every client of the server.
  int64_t add(const std::string& key, int64_t delta) override;
  // EXISTS.
  bool check(const std::string& key) override;
  // The timeout given at construction.
  std::chrono::milliseconds timeout() const override { return timeout_; }
  // "redis://host:port (keys under prefix)" for messages.
  std::string description() const;

 private:
  // Opens the connection (again, after an I/O error); throws naming the server.
  void connect();
  // Runs one command of `argv` and returns its reply (freed by the caller via Reply).
  struct Reply;
  Reply command(const std::vector<std::string>& argv);

  std::string host_;
  int port_;
  std::string prefix_;
  std::chrono::milliseconds timeout_;
  std::mutex mutex_;
  redisContext* context_ = nullptr;
};

}  // namespace tessera::distributed
