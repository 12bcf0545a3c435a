#pragma once

// The vocabulary of global tensors (DESIGN §4): which ranks hold a tensor
// (Placement) and how it maps onto them (NdSbp, one Sbp per mesh axis).
// Both are interned, so equality and hashing are pointer operations and
// caches can key on them.

#include <cstdint>
#include <string>
#include <vector>

#include "tessera/core/device.h"
#include "tessera/core/sbp.h"

namespace tessera {

// Device type + ranks (of the default process group) + mesh shape. A 1-D
// mesh [4] over ranks {0,1,2,3}, a 2-D mesh [2,2] over the same ranks (rank
// ranks[i] sits at row i / 2, column i % 2), ...
class Placement {
 public:
  // An undefined placement (the placement of a local tensor).
  Placement() = default;
  // `mesh` defaults to 1-D over all `ranks`; its product must equal ranks.size().
  Placement(DeviceType device, std::vector<int> ranks, std::vector<int64_t> mesh = {});
  // CPU placement over ranks [0, n) as a 1-D mesh.
  static Placement cpu(int n);
  // CPU placement over ranks [0, product(mesh)) shaped as `mesh`.
  static Placement cpu_mesh(std::vector<int64_t> mesh);

  bool defined() const { return data_ != nullptr; }
  DeviceType device_type() const;
  const std::vector<int>& ranks() const;
  const std::vector<int64_t>& mesh() const;
  int ndim() const { return static_cast<int>(mesh().size()); }
  int size() const { return static_cast<int>(ranks().size()); }
  // Position of `rank` in ranks(), or -1 when the placement does not hold it.
  int index_of(int rank) const;
  bool contains(int rank) const { return index_of(rank) >= 0; }
  // Mesh coordinates of the rank at `index` in ranks().
  std::vector<int64_t> coordinate(int index) const;
  // Index in ranks() of the rank at mesh coordinates `coord`.
  int index_at(const std::vector<int64_t>& coord) const;

  bool operator==(const Placement& other) const { return data_ == other.data_; }
  const void* id() const { return data_; }

  struct Data;

 private:
  const Data* data_ = nullptr;
};

// "cpu:[0, 1, 2, 3]" or "cpu:[0, 1, 2, 3] as [2, 2]".
std::string placement_str(const Placement& placement);

// One Sbp per mesh axis, interned.
class NdSbp {
 public:
  NdSbp() = default;
  NdSbp(std::vector<Sbp> sbps);  // NOLINT: implicit from a list is the natural spelling
  NdSbp(Sbp sbp) : NdSbp(std::vector<Sbp>{sbp}) {}  // NOLINT
  // Broadcast on every one of `ndim` mesh axes.
  static NdSbp broadcast(int ndim) {
    return NdSbp(std::vector<Sbp>(static_cast<size_t>(ndim), Sbp::broadcast()));
  }

  bool defined() const { return data_ != nullptr; }
  const std::vector<Sbp>& sbps() const;
  int ndim() const { return static_cast<int>(sbps().size()); }
  const Sbp& operator[](int axis) const { return sbps().at(static_cast<size_t>(axis)); }
  bool any_partial() const;
  bool all_broadcast() const;
  bool operator==(const NdSbp& other) const { return data_ == other.data_; }

 private:
  const std::vector<Sbp>* data_ = nullptr;
};

// "(S(0), B)" for 2-D, "S(0)" for 1-D.
std::string nd_sbp_str(const NdSbp& sbp);

}  // namespace tessera
