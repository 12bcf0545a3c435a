#include "tessera/core/placement.h"

#include <algorithm>
#include <map>
#include <memory>
#include <mutex>
#include <set>

#include "tessera/core/error.h"
#include "tessera/core/shape.h"

namespace tessera {

struct Placement::Data {
  DeviceType device;
  std::vector<int> ranks;
  std::vector<int64_t> mesh;
  std::vector<int64_t> mesh_strides;
  std::map<int, int> index;  // rank -> position
};

namespace {

std::mutex& intern_mutex() {
  static std::mutex* mutex = new std::mutex();
  return *mutex;
}

}  // namespace

Placement::Placement(DeviceType device, std::vector<int> ranks, std::vector<int64_t> mesh) {
  TESSERA_CHECK(!ranks.empty(), "[placement] needs at least one rank");
  std::set<int> seen;
  for (int rank : ranks) {
    TESSERA_CHECK(rank >= 0, "[placement] ranks must be non-negative, got ", rank);
    TESSERA_CHECK(seen.insert(rank).second, "[placement] rank ", rank, " is listed twice");
  }
  if (mesh.empty()) mesh = {static_cast<int64_t>(ranks.size())};
  int64_t product = 1;
  for (int64_t size : mesh) {
    TESSERA_CHECK(size >= 1, "[placement] mesh sizes must be positive, got ", shape_str(mesh));
    product *= size;
  }
  TESSERA_CHECK(product == static_cast<int64_t>(ranks.size()), "[placement] mesh ",
                shape_str(mesh), " holds ", product, " ranks but ", ranks.size(), " were given");
  using Key = std::tuple<DeviceType, std::vector<int>, std::vector<int64_t>>;
  static auto* table = new std::map<Key, std::unique_ptr<Data>>();
  std::lock_guard<std::mutex> lock(intern_mutex());
  auto& slot = (*table)[Key{device, ranks, mesh}];
  if (!slot) {
    slot = std::make_unique<Data>();
    slot->device = device;
    slot->ranks = ranks;
    slot->mesh = mesh;
    slot->mesh_strides = contiguous_strides(mesh);
    for (size_t i = 0; i < ranks.size(); ++i) slot->index[ranks[i]] = static_cast<int>(i);
  }
  data_ = slot.get();
}

Placement Placement::cpu(int n) {
  TESSERA_CHECK(n >= 1, "[placement] needs at least one rank, got ", n);
  std::vector<int> ranks(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) ranks[static_cast<size_t>(i)] = i;
  return Placement(DeviceType::cpu, ranks);
}

Placement Placement::cpu_mesh(std::vector<int64_t> mesh) {
  int64_t n = 1;
  for (int64_t size : mesh) n *= size;
  TESSERA_CHECK(n >= 1, "[placement] mesh ", shape_str(mesh), " holds no rank");
  std::vector<int> ranks(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) ranks[static_cast<size_t>(i)] = i;
  return Placement(DeviceType::cpu, ranks, std::move(mesh));
}

DeviceType Placement::device_type() const {
  TESSERA_CHECK(data_, "[placement] undefined placement");
  return data_->device;
}

const std::vector<int>& Placement::ranks() const {
  TESSERA_CHECK(data_, "[placement] undefined placement");
  return data_->ranks;
}

const std::vector<int64_t>& Placement::mesh() const {
  TESSERA_CHECK(data_, "[placement] undefined placement");
  return data_->mesh;
}

int Placement::index_of(int rank) const {
  TESSERA_CHECK(data_, "[placement] undefined placement");
  auto it = data_->index.find(rank);
  return it == data_->index.end() ? -1 : it->second;
}

std::vector<int64_t> Placement::coordinate(int index) const {
  const std::vector<int64_t>& m = mesh();
  std::vector<int64_t> coord(m.size());
  int64_t rest = index;
  for (size_t a = 0; a < m.size(); ++a) {
    coord[a] = rest / data_->mesh_strides[a];
    rest %= data_->mesh_strides[a];
  }
  return coord;
}

int Placement::index_at(const std::vector<int64_t>& coord) const {
  int64_t index = 0;
  for (size_t a = 0; a < coord.size(); ++a) index += coord[a] * data_->mesh_strides[a];
  return static_cast<int>(index);
}

std::string placement_str(const Placement& placement) {
  if (!placement.defined()) return "local";
  std::string text = placement.device_type() == DeviceType::cpu ? "cpu:[" : "cuda:[";
  const std::vector<int>& ranks = placement.ranks();
  // A long run of consecutive ranks reads as its ends.
  const bool consecutive = ranks.size() > 8 &&
                           ranks.back() - ranks.front() == static_cast<int>(ranks.size()) - 1 &&
                           std::is_sorted(ranks.begin(), ranks.end());
  if (consecutive) {
    text += std::to_string(ranks.front()) + ", " + std::to_string(ranks[1]) + ", ..., " +
            std::to_string(ranks.back());
  } else {
    for (size_t i = 0; i < ranks.size(); ++i) text += (i ? ", " : "") + std::to_string(ranks[i]);
  }
  text += "]";
  if (placement.ndim() > 1) text += " as " + shape_str(placement.mesh());
  return text;
}

NdSbp::NdSbp(std::vector<Sbp> sbps) {
  TESSERA_CHECK(!sbps.empty(), "[sbp] an NdSbp needs one Sbp per mesh axis, got none");
  using Key = std::vector<std::pair<int, int64_t>>;
  Key key;
  for (const Sbp& sbp : sbps) {
    TESSERA_CHECK(!sbp.is_split() || sbp.axis >= 0, "[sbp] split axis must be non-negative, got ",
                  sbp.axis);
    key.emplace_back(static_cast<int>(sbp.kind), sbp.is_split() ? sbp.axis : 0);
  }
  static auto* table = new std::map<Key, std::unique_ptr<std::vector<Sbp>>>();
  std::lock_guard<std::mutex> lock(intern_mutex());
  auto& slot = (*table)[key];
  if (!slot) {
    for (Sbp& sbp : sbps) {
      if (!sbp.is_split()) sbp.axis = 0;
    }
    slot = std::make_unique<std::vector<Sbp>>(std::move(sbps));
  }
  data_ = slot.get();
}

const std::vector<Sbp>& NdSbp::sbps() const {
  TESSERA_CHECK(data_, "[sbp] undefined NdSbp");
  return *data_;
}

bool NdSbp::any_partial() const {
  for (const Sbp& sbp : sbps()) {
    if (sbp.is_partial()) return true;
  }
  return false;
}

bool NdSbp::all_broadcast() const {
  for (const Sbp& sbp : sbps()) {
    if (!sbp.is_broadcast()) return false;
  }
  return true;
}

std::string nd_sbp_str(const NdSbp& sbp) {
  if (!sbp.defined()) return "local";
  if (sbp.ndim() == 1) return sbp_str(sbp[0]);
  std::string text = "(";
  for (int a = 0; a < sbp.ndim(); ++a) text += (a ? ", " : "") + sbp_str(sbp[a]);
  return text + ")";
}

}  // namespace tessera
