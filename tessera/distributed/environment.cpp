#include "tessera/distributed/environment.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <optional>
#include <vector>

#include "tessera/core/error.h"
#include "tessera/distributed/redis_store.h"

namespace tessera::distributed {
namespace {

std::optional<std::string> get_var(const char* name) {
  const char* value = std::getenv(name);
  if (value == nullptr) return std::nullopt;
  return std::string(value);
}

// Parses a whole decimal integer; the error names the variable and value.
int parse_int(const char* name, const std::string& text) {
  int value = 0;
  const char* end = text.data() + text.size();
  auto [ptr, error] = std::from_chars(text.data(), end, value);
  TESSERA_CHECK(!text.empty() && error == std::errc() && ptr == end, "[Environment] ", name, "='",
                text, "' is not an integer");
  return value;
}

// One launcher's names for rank, world size, local rank and local world size.
struct Names {
  const char* rank;
  const char* world_size;
  const char* local_rank;
  const char* local_world_size;
};

constexpr Names kTessera{"RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"};
constexpr Names kOpenMpi{"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
                         "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE"};
constexpr Names kSlurm{"SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "SLURM_NTASKS_PER_NODE"};

void read_ranks(const Names& names, Environment& env) {
  auto world = get_var(names.world_size);
  TESSERA_CHECK(world.has_value(), "[Environment] ", names.rank, " is set but ", names.world_size,
                " is not; set both");
  env.rank = parse_int(names.rank, *get_var(names.rank));
  env.world_size = parse_int(names.world_size, *world);
  TESSERA_CHECK(env.world_size >= 1, "[Environment] ", names.world_size, "=", env.world_size,
                " must be at least 1");
  TESSERA_CHECK(env.rank >= 0 && env.rank < env.world_size, "[Environment] ", names.rank, "=",
                env.rank, " is outside [0, ", env.world_size, ") (", names.world_size, "=",
                env.world_size, ")");
  // Without local values, assume one machine: the local view is the global one.
  auto local_rank = get_var(names.local_rank);
  auto local_world = get_var(names.local_world_size);
  env.local_rank = local_rank ? parse_int(names.local_rank, *local_rank) : env.rank;
  env.local_world_size =
      local_world ? parse_int(names.local_world_size, *local_world) : env.world_size;
  TESSERA_CHECK(env.local_world_size >= 1 && env.local_world_size <= env.world_size,
                "[Environment] ", names.local_world_size, "=", env.local_world_size,
                " must be in [1, ", env.world_size, "] (", names.world_size, "=", env.world_size,
                ")");
  TESSERA_CHECK(env.local_rank >= 0 && env.local_rank < env.local_world_size, "[Environment] ",
                names.local_rank, "=", env.local_rank, " is outside [0, ", env.local_world_size,
                ")");
}

// Expands Slurm's compressed task counts, "2(x3),1" = {2, 2, 2, 1}.
std::vector<int> parse_tasks_per_node(const std::string& text) {
  std::vector<int> counts;
  size_t at = 0;
  while (at <= text.size()) {
    size_t end = text.find(',', at);
    if (end == std::string::npos) end = text.size();
    const std::string item = text.substr(at, end - at);
    const size_t open = item.find("(x");
    int repeat = 1;
    std::string count = item;
    if (open != std::string::npos) {
      TESSERA_CHECK(item.back() == ')', "[Environment] SLURM_TASKS_PER_NODE='", text,
                    "' is not like 2(x3),1");
      count = item.substr(0, open);
      repeat = parse_int("SLURM_TASKS_PER_NODE", item.substr(open + 2, item.size() - open - 3));
    }
    const int value = parse_int("SLURM_TASKS_PER_NODE", count);
    TESSERA_CHECK(value >= 1 && repeat >= 1 && counts.size() + repeat <= 1000000,
                  "[Environment] SLURM_TASKS_PER_NODE='", text, "' has a count below 1");
    counts.insert(counts.end(), static_cast<size_t>(repeat), value);
    at = end + 1;
  }
  return counts;
}

// Slurm sets SLURM_NTASKS_PER_NODE only for --ntasks-per-node; otherwise
// SLURM_TASKS_PER_NODE with SLURM_NODEID, or at least SLURM_NNODES, tell how
// many ranks share this machine. Without them a multi-node job would be
// taken for one machine and its ranks would listen on loopback.
void read_slurm_nodes(Environment& env) {
  if (get_var("SLURM_NTASKS_PER_NODE")) return;
  int local_world = 0;
  if (auto text = get_var("SLURM_TASKS_PER_NODE")) {
    const std::vector<int> counts = parse_tasks_per_node(*text);
    local_world = *std::max_element(counts.begin(), counts.end());
    if (auto node = get_var("SLURM_NODEID")) {
      const int index = parse_int("SLURM_NODEID", *node);
      TESSERA_CHECK(index >= 0 && index < static_cast<int>(counts.size()), "[Environment] ",
                    "SLURM_NODEID=", index, " is outside [0, ", counts.size(),
                    ") (SLURM_TASKS_PER_NODE='", *text, "')");
      local_world = counts[static_cast<size_t>(index)];
    }
  } else if (auto nodes = get_var("SLURM_NNODES")) {
    const int count = parse_int("SLURM_NNODES", *nodes);
    TESSERA_CHECK(count >= 1, "[Environment] SLURM_NNODES=", count, " must be at least 1");
    if (count == 1) return;
    local_world = (env.world_size + count - 1) / count;  // only "several machines" matters
  } else {
    return;
  }
  env.local_world_size = std::min(local_world, env.world_size);
  if (!get_var("SLURM_LOCALID")) env.local_rank = env.rank % env.local_world_size;
  TESSERA_CHECK(env.local_rank < env.local_world_size,
                "[Environment] SLURM_LOCALID=", env.local_rank, " is outside [0, ",
                env.local_world_size,
                ") (ranks on this node, from SLURM_TASKS_PER_NODE or SLURM_NNODES)");
}

void read_rendezvous(Environment& env) {
  auto url = get_var("TESSERA_RDZV");
  if (!url) {
    // A single process needs no shared store; init_process_group makes a private one.
    if (env.world_size == 1) return;
    TESSERA_CHECK(!get_var("MASTER_ADDR").has_value(),
                  "[Environment] MASTER_ADDR/MASTER_PORT (a TCP store) is not supported yet; set "
                  "TESSERA_RDZV=file:///shared/dir or redis://host:port/job");
    TESSERA_FAIL("[Environment] TESSERA_RDZV is not set (world size ", env.world_size,
                 "); set it to file:///abs/dir, a folder every rank can see, or "
                 "redis://host:port/job");
  }
  const std::string file_prefix = "file://";
  const std::string redis_prefix = "redis://";
  if (url->rfind(file_prefix, 0) == 0) {
    TESSERA_CHECK(url->size() > file_prefix.size() && (*url)[file_prefix.size()] == '/',
                  "[Environment] TESSERA_RDZV='", *url,
                  "' needs an absolute path: file:///abs/dir");
  } else if (url->rfind(redis_prefix, 0) == 0) {
    try {
      RedisUrl::parse(*url);
    } catch (const Error& error) {
      TESSERA_FAIL("[Environment] TESSERA_RDZV: ", error.what());
    }
  } else {
    TESSERA_FAIL("[Environment] TESSERA_RDZV='", *url,
                 "' has an unknown scheme; valid: file:///abs/dir, redis://host:port[/job]");
  }
  env.rendezvous = *url;
}

}  // namespace

Environment Environment::from_env() {
  Environment env;
  if (get_var(kTessera.rank)) {
    read_ranks(kTessera, env);
  } else if (get_var(kOpenMpi.rank)) {
    read_ranks(kOpenMpi, env);
  } else if (get_var(kSlurm.rank)) {
    read_ranks(kSlurm, env);
    read_slurm_nodes(env);
  } else {
    TESSERA_CHECK(!get_var(kTessera.world_size),
                  "[Environment] WORLD_SIZE is set but RANK is not; "
                  "set both");
  }
  read_rendezvous(env);
  env.timeout = timeout_from_env();
  return env;
}

std::chrono::milliseconds timeout_from_env() {
  const auto text = get_var("TESSERA_TIMEOUT_S");
  if (!text) return Environment{}.timeout;
  char* end = nullptr;
  const double seconds = std::strtod(text->c_str(), &end);
  TESSERA_CHECK(!text->empty() && end == text->c_str() + text->size() && std::isfinite(seconds) &&
                    seconds > 0 && seconds <= 1e7,
                "[Environment] TESSERA_TIMEOUT_S='", *text,
                "' must be a positive number of seconds (at most 1e7)");
  return std::chrono::milliseconds(static_cast<int64_t>(std::ceil(seconds * 1000)));
}

}  // namespace tessera::distributed
