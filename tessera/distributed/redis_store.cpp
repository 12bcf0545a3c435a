#include "tessera/distributed/redis_store.h"

#include <hiredis/hiredis.h>
#include <sys/time.h>

#include <cctype>
#include <charconv>
#include <memory>
#include <thread>

#include "tessera/core/error.h"

namespace tessera::distributed {
namespace {

timeval to_timeval(std::chrono::milliseconds duration) {
  timeval value{};
  value.tv_sec = static_cast<time_t>(duration.count() / 1000);
  value.tv_usec = static_cast<suseconds_t>((duration.count() % 1000) * 1000);
  return value;
}

}  // namespace

RedisUrl RedisUrl::parse(const std::string& url) {
  const std::string scheme = "redis://";
  const char* form = "; valid: redis://host:port or redis://host:port/job";
  TESSERA_CHECK(url.rfind(scheme, 0) == 0, "[RedisUrl] '", url, "' does not start with redis://",
                form);
  std::string rest = url.substr(scheme.size());
  RedisUrl parsed;
  if (const size_t slash = rest.find('/'); slash != std::string::npos) {
    parsed.job = rest.substr(slash + 1);
    rest.resize(slash);
    TESSERA_CHECK(!parsed.job.empty(), "[RedisUrl] '", url, "' ends in '/' without a job name",
                  form);
    for (unsigned char c : parsed.job) {
      TESSERA_CHECK(std::isalnum(c) || c == '_' || c == '-' || c == '.', "[RedisUrl] '", url,
                    "': the job name '", parsed.job,
                    "' may hold only letters, digits, '_', '-' "
                    "and '.'");
    }
  }
  const size_t colon = rest.rfind(':');
  TESSERA_CHECK(colon != std::string::npos && colon > 0, "[RedisUrl] '", url,
                "' needs a host and a port", form);
  parsed.host = rest.substr(0, colon);
  const std::string port = rest.substr(colon + 1);
  int value = 0;
  auto [end, error] = std::from_chars(port.data(), port.data() + port.size(), value);
  TESSERA_CHECK(!port.empty() && error == std::errc() && end == port.data() + port.size() &&
                    value > 0 && value < 65536,
                "[RedisUrl] '", url, "': port '", port, "' is not in [1, 65535]", form);
  parsed.port = value;
  return parsed;
}

struct RedisStore::Reply {
  std::unique_ptr<redisReply, void (*)(void*)> reply{nullptr, freeReplyObject};
  redisReply* operator->() const { return reply.get(); }
};

RedisStore::RedisStore(std::string host, int port, std::string prefix,
                       std::chrono::milliseconds timeout)
    : host_(std::move(host)), port_(port), prefix_(std::move(prefix)), timeout_(timeout) {
  TESSERA_CHECK(!host_.empty(), "[RedisStore] the host is empty; use redis://host:port");
  TESSERA_CHECK(port_ > 0 && port_ < 65536, "[RedisStore] port ", port_, " is outside [1, 65535]");
  TESSERA_CHECK(timeout_.count() > 0, "[RedisStore] timeout must be positive, got ",
                timeout_.count(), " ms");
  std::lock_guard<std::mutex> lock(mutex_);
  connect();
}

RedisStore::~RedisStore() {
  if (context_ != nullptr) redisFree(context_);
}

std::string RedisStore::description() const {
  return str_cat("redis://", host_, ":", port_, " (keys under '", prefix_, "')");
}

void RedisStore::connect() {
  if (context_ != nullptr) redisFree(context_);
  context_ = redisConnectWithTimeout(host_.c_str(), port_, to_timeval(timeout_));
  TESSERA_CHECK(context_ != nullptr, "[RedisStore] cannot allocate a connection to ",
                description());
  if (context_->err != 0) {
    const std::string reason = context_->errstr;
    redisFree(context_);
    context_ = nullptr;
    TESSERA_FAIL("[RedisStore] cannot connect to ", description(), ": ", reason,
                 " (is redis-server running there?)");
  }
  // A server that stops answering must not block a command past the timeout.
  redisSetTimeout(context_, to_timeval(timeout_));
}

RedisStore::Reply RedisStore::command(const std::vector<std::string>& argv) {
  std::vector<const char*> pointers;
  std::vector<size_t> lengths;
  for (const std::string& arg : argv) {
    pointers.push_back(arg.data());
    lengths.push_back(arg.size());
  }
  // One reconnection: a connection that failed once (say, the server
  // restarted) gets a fresh start before the command fails.
  for (int attempt = 0;; ++attempt) {
    if (context_ == nullptr || context_->err != 0) connect();
    Reply reply;
    reply.reply.reset(static_cast<redisReply*>(redisCommandArgv(
        context_, static_cast<int>(argv.size()), pointers.data(), lengths.data())));
    if (reply.reply != nullptr) {
      TESSERA_CHECK(reply->type != REDIS_REPLY_ERROR, "[RedisStore] ", argv[0], " on ",
                    description(), " failed: ", std::string(reply->str, reply->len));
      return reply;
    }
    if (attempt == 1) {
      TESSERA_FAIL("[RedisStore] ", argv[0], " on ", description(), " failed: ", context_->errstr);
    }
  }
}

void RedisStore::set(const std::string& key, const std::vector<char>& value) {
  std::lock_guard<std::mutex> lock(mutex_);
  command({"SET", prefix_ + key, std::string(value.begin(), value.end())});
}

bool RedisStore::create(const std::string& key, const std::vector<char>& value) {
  std::lock_guard<std::mutex> lock(mutex_);
  Reply reply = command({"SET", prefix_ + key, std::string(value.begin(), value.end()), "NX"});
  return reply->type == REDIS_REPLY_STATUS;  // "OK"; nil when the key existed
}

std::vector<char> RedisStore::get(const std::string& key) {
  wait({key}, timeout_);
  std::lock_guard<std::mutex> lock(mutex_);
  Reply reply = command({"GET", prefix_ + key});
  TESSERA_CHECK(reply->type == REDIS_REPLY_STRING, "[RedisStore] key '", key, "' vanished from ",
                description(), " after it appeared");
  return std::vector<char>(reply->str, reply->str + reply->len);
}

bool RedisStore::check(const std::string& key) {
  std::lock_guard<std::mutex> lock(mutex_);
  Reply reply = command({"EXISTS", prefix_ + key});
  return reply->type == REDIS_REPLY_INTEGER && reply->integer > 0;
}

void RedisStore::wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) {
  poll_until_present(keys, timeout, "RedisStore", "on " + description());
}

int64_t RedisStore::add(const std::string& key, int64_t delta) {
  std::lock_guard<std::mutex> lock(mutex_);
  Reply reply = command({"INCRBY", prefix_ + key, std::to_string(delta)});
  TESSERA_CHECK(reply->type == REDIS_REPLY_INTEGER, "[RedisStore] add: key '", key,
                "' did not give an integer on ", description());
  return reply->integer;
}

}  // namespace tessera::distributed
