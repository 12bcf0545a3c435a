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
#include <string>

#include "tessera/ops/op.h"

namespace tessera::global {

enum class Collective : uint8_t { all_reduce, reduce_scatter, all_gather, all_to_all, broadcast };
const char* collective_name(Collective kind);

// One collective on one group size: α seconds plus β seconds per byte on
// the busiest link.
struct LinkModel {
  double alpha_seconds = 50e-6;
  double seconds_per_byte = 1e-9;  // 1 GB/s
};

// A device's peak rates.
struct ComputeModel {
  double flops_per_second = 100e9;
  double bytes_per_second = 20e9;
};

class CostModel {
 public:
  CostModel() = default;

  // The α-β fit for groups of `group_size` ranks; sizes without a fit use
  // the nearest size that has one (the defaults when none has).
  void set_link(int64_t group_size, LinkModel link) { links_[group_size] = link; }
  LinkModel link(int64_t group_size) const;
  void set_compute(ComputeModel compute) { compute_ = compute; }
  const ComputeModel& compute() const { return compute_; }

  // Bytes one rank sends for a collective to which it hands `payload_bytes`
  // (all-reduce: the tensor; reduce-scatter and all-to-all: all pieces;
  // all-gather: its own piece; broadcast: the tensor), ring algorithms.
  static double link_bytes(Collective kind, double payload_bytes, int64_t group_size);
  // Time of one collective of that payload.
  double collective_seconds(Collective kind, double payload_bytes, int64_t group_size) const;
  // Time to send `bytes` over one link (point-to-point pieces).
  double transfer_seconds(double bytes, int64_t group_size) const;
  // Time of a local copy of `bytes` (read and write).
  double copy_seconds(double bytes) const;
  // Roofline time of a local op.
  double compute_seconds(const OpCost& cost) const;

  // A profile: {"links": [{"group_size": 2, "alpha_seconds": 4e-05,
  // "seconds_per_byte": 9e-10}, ...], "compute": {"flops_per_second": ...,
  // "bytes_per_second": ...}}. Raises on malformed text, naming the field.
  static CostModel from_json(const std::string& text);

 private:
  std::map<int64_t, LinkModel> links_;
  ComputeModel compute_;
};

// The model eager dispatch uses: the defaults, or the profile named by
// TESSERA_COST_PROFILE (a JSON file as above), read once.
const CostModel& default_cost_model();

}  // namespace tessera::global
