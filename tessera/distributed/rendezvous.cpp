#include "tessera/distributed/rendezvous.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>

#include "tessera/core/error.h"

namespace tessera::distributed {
namespace {

std::string get_var(const char* name) {
  const char* value = std::getenv(name);
  return value == nullptr ? std::string() : std::string(value);
}

}  // namespace

// A killed rank stays a zombie until the launcher (or mpirun) reaps it.
bool process_ended(int64_t pid) {
  if (pid <= 0) return false;
  if (::kill(static_cast<pid_t>(pid), 0) != 0) return errno == ESRCH;
  std::FILE* file = std::fopen(str_cat("/proc/", pid, "/stat").c_str(), "r");
  if (file == nullptr) return false;
  char line[512] = {};
  const bool read = std::fgets(line, sizeof(line), file) != nullptr;
  std::fclose(file);
  // "pid (comm) S ...": the state follows the last ')'.
  const char* close = read ? std::strrchr(line, ')') : nullptr;
  return close != nullptr && (close[2] == 'Z' || close[2] == 'X');
}

std::chrono::milliseconds Deadline::left() const {
  const auto left = std::chrono::ceil<std::chrono::milliseconds>(end_ - Clock::now());
  return std::max(left, std::chrono::milliseconds(1));
}

std::string RankRecord::encode() const {
  return str_cat("world_size=", world_size, "\npid=", pid, "\nmachine=", machine);
}

std::optional<RankRecord> RankRecord::decode(const std::vector<char>& bytes) {
  std::istringstream text(std::string(bytes.begin(), bytes.end()));
  RankRecord record;
  std::string line;
  int fields = 0;
  while (std::getline(text, line)) {
    const size_t equals = line.find('=');
    if (equals == std::string::npos) return std::nullopt;
    const std::string name = line.substr(0, equals);
    const std::string value = line.substr(equals + 1);
    try {
      if (name == "world_size") {
        record.world_size = std::stoi(value);
        ++fields;
      } else if (name == "pid") {
        record.pid = std::stoll(value);
        ++fields;
      } else if (name == "machine") {
        record.machine = value;
        ++fields;
      }
    } catch (const std::exception&) {
      return std::nullopt;
    }
  }
  if (fields != 3) return std::nullopt;
  return record;
}

std::string machine_identity() {
  char host[256] = {};
  ::gethostname(host, sizeof(host) - 1);
  std::string boot;
  if (std::FILE* file = std::fopen("/proc/sys/kernel/random/boot_id", "r")) {
    char line[64] = {};
    if (std::fgets(line, sizeof(line), file) != nullptr) boot = line;
    std::fclose(file);
  }
  boot.erase(std::remove(boot.begin(), boot.end(), '\n'), boot.end());
  return str_cat(host, "/", boot);
}

std::string job_id_from_env() {
  if (std::string job = get_var("TESSERA_JOB_ID"); !job.empty()) return job;
  if (std::string job = get_var("SLURM_JOB_ID"); !job.empty()) {
    const std::string step = get_var("SLURM_STEP_ID");
    return "slurm-" + job + (step.empty() ? "" : "." + step);
  }
  if (std::string job = get_var("PMIX_NAMESPACE"); !job.empty()) return "mpi-" + job;
  if (std::string job = get_var("OMPI_MCA_ess_base_jobid"); !job.empty()) return "mpi-" + job;
  return "";
}

std::string job_key_prefix(const std::string& job_id) {
  return job_id.empty() ? std::string() : job_id + "/";
}

std::string rank_key(const std::string& prefix, int rank) {
  return str_cat(prefix, "rank/", rank);
}

void join_rendezvous(Store& store, const std::string& prefix, int rank, int world_size,
                     const std::string& url, const Deadline& deadline) {
  RankRecord mine{world_size, static_cast<int64_t>(::getpid()), machine_identity()};
  const std::string encoded = mine.encode();
  const std::string own_key = rank_key(prefix, rank);
  // One step: two processes started as the same rank (a second job on this
  // rendezvous, or keys an earlier job left) cannot both pass.
  TESSERA_CHECK(store.create(own_key, std::vector<char>(encoded.begin(), encoded.end())),
                "[init_process_group] rank ", rank, ": key '", own_key,
                "' already exists in the rendezvous '", url,
                "': another process claimed this rank, in this job or an earlier one (",
                prefix.empty() ? std::string("no job id is set")
                               : "job id '" + prefix.substr(0, prefix.size() - 1) + "'",
                "); use a fresh folder for file://, a new job name for redis://host:port/job, "
                "or a fresh TESSERA_JOB_ID (tessera-run picks fresh ones unless --rdzv is given)");
  std::vector<int> peers;
  if (rank == 0) {
    for (int peer = 1; peer < world_size; ++peer) peers.push_back(peer);
  } else {
    peers.push_back(0);
  }
  for (int peer : peers) {
    const std::string key = rank_key(prefix, peer);
    try {
      store.wait({key}, deadline.left());
    } catch (const Error& error) {
      TESSERA_FAIL("[init_process_group] rank ", rank, " of ", world_size, " timed out after ",
                   deadline.total().count(), " ms waiting for rank ", peer,
                   " to join the rendezvous '", url, "' (", error.what(), ")");
    }
    const std::optional<RankRecord> theirs = RankRecord::decode(store.get(key));
    TESSERA_CHECK(theirs.has_value(), "[init_process_group] rank ", rank, ": key '", key,
                  "' in the rendezvous '", url, "' does not hold a rank record");
    TESSERA_CHECK(theirs->world_size == world_size, "[init_process_group] rank ", rank,
                  " was started with world size ", world_size, " (WORLD_SIZE) but rank ", peer,
                  " with world size ", theirs->world_size,
                  "; every rank of a job needs the same world size");
  }
}

std::string ended_ranks(Store& store, const std::string& prefix,
                        const std::vector<int>& world_ranks, int self) {
  const std::string here = machine_identity();
  std::string text;
  for (int peer : world_ranks) {
    if (peer == self) continue;
    try {
      const std::string key = rank_key(prefix, peer);
      if (!store.check(key)) continue;
      const std::optional<RankRecord> record = RankRecord::decode(store.get(key));
      if (!record || record->machine != here || !process_ended(record->pid)) continue;
      text +=
          str_cat(text.empty() ? "" : ", ", "rank ", peer, " (process ", record->pid, " exited)");
    } catch (const std::exception&) {
      // The store may be gone too (the launcher removed it): nothing to add.
    }
  }
  return text;
}

}  // namespace tessera::distributed
