#pragma once

// The one cost model (DESIGN §4). It prices exactly the plans that run:
// the boxing steps eager dispatch executes (and graph mode will insert),
// and the local op each rank computes. Communication is α-β per collective
// and group size: seconds = α + (bytes on the busiest link) · β, with the
// link bytes of ring algorithms. Compute is a roofline over the FLOPs and
// bytes an OpDef declares. The figures are defaults for a small CPU
// machine with loopback links unless a measured or declared profile sets
// them (set_link, set_compute, from_json).

#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "tessera/ops/op.h"

namespace tessera::global {

enum class Collective : uint8_t { all_reduce, reduce_scatter, all_gather, all_to_all, broadcast };
const char* collective_name(Collective kind);

// The name a profile gives `kind` ("all_reduce", "all_gather", ...).
const char* collective_key(Collective kind);

// One collective on one group size: α seconds plus β seconds per byte on
// the busiest link.
struct LinkModel {
  double alpha_seconds = 50e-6;
  double seconds_per_byte = 1e-9;  // 1 GB/s
};

// A device's rates: what its ops reach, not its datasheet peak.
struct ComputeModel {
  double flops_per_second = 100e9;
  double bytes_per_second = 20e9;
  // What every op call costs beyond its FLOPs and bytes (dispatch, a
  // kernel launch); views cost nothing.
  double seconds_per_call = 0;
};

class CostModel {
 public:
  CostModel() = default;

  // The α-β fit for groups of `group_size` ranks, for every collective or
  // for collectives of one `kind` only (the transports may differ: a
  // gather's time is not an all-reduce's). A collective uses its own kind's
  // fits where there are any, else the fits for every kind; sizes without
  // a fit use the nearest size that has one (the defaults when none has).
  void set_link(int64_t group_size, LinkModel link, std::optional<Collective> kind = {});
  // `span`: how far apart in rank order the group's first and last ranks
  // are, plus one (a group of consecutive ranks: its size). Groups that
  // span more than ranks_per_node() ranks cross nodes and use the
  // inter-node fits, where there are any.
  LinkModel link(int64_t group_size, int64_t span = 0, std::optional<Collective> kind = {}) const;
  void set_inter_node_link(int64_t group_size, LinkModel link, std::optional<Collective> kind = {});
  void set_ranks_per_node(int64_t ranks) { ranks_per_node_ = ranks; }
  int64_t ranks_per_node() const { return ranks_per_node_; }
  void set_compute(ComputeModel compute) { compute_ = compute; }
  const ComputeModel& compute() const { return compute_; }
  // The rates ops of `kind` reach (matmul, convolution, ...), where they
  // differ from compute().
  void set_compute(OpKind kind, ComputeModel compute) { kinds_[kind] = compute; }
  const ComputeModel& compute(OpKind kind) const;
  // Memory per device, bytes (0: not known).
  double memory_bytes = 0;
  // The device's datasheet peak, FLOP/s, for MFU (0: not known).
  double peak_flops_per_second = 0;
  // Whether collectives overlap the compute beside them (false where the
  // ranks share every core with the compute).
  bool overlaps_communication = true;
  // How the device's allocator rounds a request: cpu, Tessera's CPU
  // allocator's size classes (CpuAllocator::round_size); exact, as asked
  // (a declared profile's devices). Memory predictions count what it
  // reserves.
  enum class Allocator : uint8_t { cpu, exact };
  Allocator allocator = Allocator::cpu;
  double allocated_bytes(double bytes) const;
  // What the profile describes, and where its figures come from.
  std::string name;
  std::string sources;

  // Bytes one rank sends for a collective to which it hands `payload_bytes`
  // (all-reduce: the tensor; reduce-scatter and all-to-all: all pieces;
  // all-gather: its own piece; broadcast: the tensor), ring algorithms.
  static double link_bytes(Collective kind, double payload_bytes, int64_t group_size);
  // Time of one collective of that payload.
  double collective_seconds(Collective kind, double payload_bytes, int64_t group_size,
                            int64_t span = 0) const;
  // Time to send `bytes` over one link (point-to-point pieces).
  double transfer_seconds(double bytes, int64_t group_size) const;
  // Time of a local copy of `bytes` (read and write).
  double copy_seconds(double bytes) const;
  // Roofline time of a local op (of `kind`: its rates where the profile
  // has them).
  double compute_seconds(const OpCost& cost, OpKind kind = OpKind::other) const;

  // A profile:
  //   {"name": "...", "sources": "...", "memory_bytes": 8e10, "peak_flops_per_second": 9.89e14,
  //    "ranks_per_node": 8, "overlaps_communication": true, "allocator": "exact",
  //    "links": [{"group_size": 2, "alpha_seconds": 4e-05, "seconds_per_byte": 9e-10},
  //              {"group_size": 2, "collective": "all_gather", ...}, ...],
  //    "inter_node_links": [...the same, for groups that cross nodes...],
  //    "compute": {"flops_per_second": ..., "bytes_per_second": ..., "seconds_per_call": ...},
  //    "compute_by_kind": {"matmul": {"flops_per_second": ..., "bytes_per_second": ...}, ...}}
  // Everything is optional. Raises on malformed text, naming the field.
  static CostModel from_json(const std::string& text);
  // from_json of a file's text; errors name the file.
  static CostModel from_file(const std::string& path);
  // The same file (from_json(to_json()) gives this model back).
  std::string to_json() const;

 private:
  // Fits by group size: for every collective, and for one kind.
  struct LinkTable {
    std::map<int64_t, LinkModel> any;
    std::map<Collective, std::map<int64_t, LinkModel>> by_kind;
    bool empty() const { return any.empty() && by_kind.empty(); }
    LinkModel find(int64_t group_size, std::optional<Collective> kind) const;
  };
  LinkTable links_;
  LinkTable inter_links_;
  int64_t ranks_per_node_ = 0;
  ComputeModel compute_;
  std::map<OpKind, ComputeModel> kinds_;
};

// The model eager dispatch uses: the defaults, or the profile named by
// TESSERA_COST_PROFILE (a JSON file as above), read once.
const CostModel& default_cost_model();

}  // namespace tessera::global
