#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "tessera/distributed/store.h"

namespace tessera::distributed {

// One time limit for a step made of several waits (claiming the rank,
// waiting for the peers, connecting to them), so the step as a whole ends
// within it instead of each wait getting the full amount.
class Deadline {
 public:
  using Clock = std::chrono::steady_clock;
  explicit Deadline(std::chrono::milliseconds total) : total_(total), end_(Clock::now() + total) {}
  // Time left, at least 1 ms (so a call given it still times out rather than blocking).
  std::chrono::milliseconds left() const;
  // The whole allowance, for messages.
  std::chrono::milliseconds total() const { return total_; }

 private:
  std::chrono::milliseconds total_;
  Clock::time_point end_;
};

// What a rank publishes about itself when it joins: the world size it was
// started with (checked against rank 0's) and where its process runs, so
// peers on the same machine can tell whether it still exists.
struct RankRecord {
  int world_size = 0;
  int64_t pid = 0;
  std::string machine;

  std::string encode() const;
  // Nothing when `bytes` is not an encoded record.
  static std::optional<RankRecord> decode(const std::vector<char>& bytes);
};

// The host name and boot id of this machine (two containers may share a
// host name; two boots never share an id). Equal texts: same machine.
std::string machine_identity();

// The job this process belongs to, which every rendezvous key is bound to:
// TESSERA_JOB_ID (tessera-run exports a fresh one), else the Slurm job and
// step, else OpenMPI's job (PMIx namespace), else "" (no launcher told us:
// the rank claims alone keep two jobs apart).
std::string job_id_from_env();

// "<job>/" under which a job's keys live, or "" without a job id.
std::string job_key_prefix(const std::string& job_id);

// The key rank `rank` claims, under `prefix` ("<job>/rank/<rank>").
std::string rank_key(const std::string& prefix, int rank);

// Claims `rank` atomically (create-exclusive), publishing its RankRecord,
// then checks that every rank was started with the same world size: rank 0
// reads every claim, the others rank 0's. Throws "[init_process_group]"
// errors naming the key and `url` when the rank is already taken, and both
// sizes on a mismatch; waits at most `deadline`.
void join_rendezvous(Store& store, const std::string& prefix, int rank, int world_size,
                     const std::string& url, const Deadline& deadline);

// Whether process `pid` of this machine has ended: gone, or a zombie its
// parent has not reaped yet.
bool process_ended(int64_t pid);

// Among `world_ranks` (ranks of the job, `self` excluded), the ones whose
// process is known to have ended, as "rank 2 (process 4242 exited)" pieces
// joined by ", "; "" when none is known. Only ranks on this machine can be
// checked; a rank's record is read without waiting.
std::string ended_ranks(Store& store, const std::string& prefix,
                        const std::vector<int>& world_ranks, int self);

}  // namespace tessera::distributed
