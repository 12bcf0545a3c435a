#include "tessera/global/cost_model.h"

#include <cmath>
#include <cstdlib>
#include <nlohmann/json.hpp>

#include "tessera/core/allocator.h"
#include "tessera/core/file.h"

namespace tessera::global {

namespace {

// Each collective's name in messages and in a profile.
struct CollectiveNames {
  Collective kind;
  const char* name;
  const char* key;
};
constexpr CollectiveNames kCollectives[] = {
    {Collective::all_reduce, "all-reduce", "all_reduce"},
    {Collective::reduce_scatter, "reduce-scatter", "reduce_scatter"},
    {Collective::all_gather, "all-gather", "all_gather"},
    {Collective::all_to_all, "all-to-all", "all_to_all"},
    {Collective::broadcast, "broadcast", "broadcast"}};

}  // namespace

const char* collective_name(Collective kind) {
  for (const CollectiveNames& names : kCollectives)
    if (names.kind == kind) return names.name;
  return "collective";
}

const char* collective_key(Collective kind) {
  for (const CollectiveNames& names : kCollectives)
    if (names.kind == kind) return names.key;
  return "collective";
}

namespace {

// The fit for the nearest group size that has one.
LinkModel nearest(const std::map<int64_t, LinkModel>& links, int64_t group_size) {
  if (links.empty()) return LinkModel{};
  auto above = links.lower_bound(group_size);
  if (above == links.end()) return std::prev(above)->second;
  if (above == links.begin() || above->first == group_size) return above->second;
  auto below = std::prev(above);
  return group_size - below->first <= above->first - group_size ? below->second : above->second;
}

}  // namespace

LinkModel CostModel::LinkTable::find(int64_t group_size, std::optional<Collective> kind) const {
  if (kind) {
    auto own = by_kind.find(*kind);
    if (own != by_kind.end() && !own->second.empty()) return nearest(own->second, group_size);
  }
  return nearest(any, group_size);
}

void CostModel::set_link(int64_t group_size, LinkModel link, std::optional<Collective> kind) {
  (kind ? links_.by_kind[*kind] : links_.any)[group_size] = link;
}

void CostModel::set_inter_node_link(int64_t group_size, LinkModel link,
                                    std::optional<Collective> kind) {
  (kind ? inter_links_.by_kind[*kind] : inter_links_.any)[group_size] = link;
}

LinkModel CostModel::link(int64_t group_size, int64_t span, std::optional<Collective> kind) const {
  const bool crosses = ranks_per_node_ > 0 && std::max(span, group_size) > ranks_per_node_;
  return crosses && !inter_links_.empty() ? inter_links_.find(group_size, kind)
                                          : links_.find(group_size, kind);
}

const ComputeModel& CostModel::compute(OpKind kind) const {
  auto found = kinds_.find(kind);
  return found == kinds_.end() ? compute_ : found->second;
}

double CostModel::link_bytes(Collective kind, double payload_bytes, int64_t group_size) {
  if (group_size <= 1) return 0;
  const double n = static_cast<double>(group_size);
  switch (kind) {
    case Collective::all_reduce:
      return 2 * payload_bytes * (n - 1) / n;
    case Collective::reduce_scatter:
      return payload_bytes * (n - 1) / n;
    case Collective::all_gather:
      return payload_bytes * (n - 1);
    case Collective::all_to_all:
      return payload_bytes * (n - 1) / n;
    case Collective::broadcast:
      return payload_bytes;
  }
  return payload_bytes;
}

double CostModel::collective_seconds(Collective kind, double payload_bytes, int64_t group_size,
                                     int64_t span) const {
  if (group_size <= 1) return 0;
  const LinkModel fit = link(group_size, span, kind);
  return fit.alpha_seconds + link_bytes(kind, payload_bytes, group_size) * fit.seconds_per_byte;
}

double CostModel::transfer_seconds(double bytes, int64_t group_size) const {
  const LinkModel fit = link(group_size);
  return fit.alpha_seconds + bytes * fit.seconds_per_byte;
}

double CostModel::copy_seconds(double bytes) const {
  return 2 * bytes / compute_.bytes_per_second;
}

double CostModel::compute_seconds(const OpCost& cost, OpKind kind) const {
  if (cost.flops == 0 && cost.bytes == 0) return 0;
  const ComputeModel& rates = compute(kind);
  return std::max(cost.flops / rates.flops_per_second, cost.bytes / rates.bytes_per_second) +
         rates.seconds_per_call;
}

namespace {

double positive(const nlohmann::json& object, const char* field, const std::string& where) {
  TESSERA_CHECK(object.is_object() && object.contains(field) && object[field].is_number(),
                "[cost_model] ", where, " needs a number '", field, "'");
  const double value = object[field].get<double>();
  TESSERA_CHECK(std::isfinite(value) && value >= 0, "[cost_model] ", where, " field '", field,
                "' must be finite and not negative, got ", value);
  return value;
}

}  // namespace

namespace {

// Each entry of `field` through `set(group_size, fit, kind)`.
template <typename Set>
void read_links(const nlohmann::json& root, const char* field, Set&& set) {
  if (!root.contains(field)) return;
  TESSERA_CHECK(root[field].is_array(), "[cost_model] '", field, "' must be an array");
  const std::string where = std::string("an entry of '") + field + "'";
  for (const nlohmann::json& entry : root[field]) {
    const double size = positive(entry, "group_size", where);
    TESSERA_CHECK(size >= 2 && size == std::floor(size) && size < 1e9, "[cost_model] ", where,
                  ": group_size must be an integer >= 2, got ", size);
    std::optional<Collective> kind;
    if (entry.contains("collective")) {
      const nlohmann::json& name = entry["collective"];
      for (const CollectiveNames& candidate : kCollectives) {
        if (name.is_string() && name == candidate.key) kind = candidate.kind;
      }
      TESSERA_CHECK(kind.has_value(), "[cost_model] ", where, ": 'collective' must be one of ",
                    "\"all_reduce\", \"reduce_scatter\", \"all_gather\", \"all_to_all\", ",
                    "\"broadcast\", got ", name.dump());
    }
    set(static_cast<int64_t>(size),
        LinkModel{positive(entry, "alpha_seconds", where),
                  positive(entry, "seconds_per_byte", where)},
        kind);
  }
}

ComputeModel read_rates(const nlohmann::json& compute, const std::string& where) {
  ComputeModel rates{positive(compute, "flops_per_second", where),
                     positive(compute, "bytes_per_second", where)};
  TESSERA_CHECK(rates.flops_per_second > 0 && rates.bytes_per_second > 0, "[cost_model] ", where,
                " rates must be positive");
  if (compute.contains("seconds_per_call")) {
    rates.seconds_per_call = positive(compute, "seconds_per_call", where);
  }
  return rates;
}

const std::map<std::string, OpKind>& kind_names() {
  static const std::map<std::string, OpKind> names = [] {
    std::map<std::string, OpKind> all;
    for (OpKind kind : {OpKind::other, OpKind::elementwise, OpKind::reduction, OpKind::view,
                        OpKind::matmul, OpKind::convolution, OpKind::normalization,
                        OpKind::indexing, OpKind::random, OpKind::collective}) {
      all[op_kind_name(kind)] = kind;
    }
    return all;
  }();
  return names;
}

nlohmann::json fit_json(int64_t size, const LinkModel& fit, std::optional<Collective> kind) {
  nlohmann::json entry{{"group_size", size}};
  if (kind) entry["collective"] = collective_key(*kind);
  entry["alpha_seconds"] = fit.alpha_seconds;
  entry["seconds_per_byte"] = fit.seconds_per_byte;
  return entry;
}

// The fits for every collective, then each kind's.
nlohmann::json links_json(const std::map<int64_t, LinkModel>& any,
                          const std::map<Collective, std::map<int64_t, LinkModel>>& by_kind) {
  nlohmann::json list = nlohmann::json::array();
  for (const auto& [size, fit] : any) list.push_back(fit_json(size, fit, std::nullopt));
  for (const auto& [kind, fits] : by_kind) {
    for (const auto& [size, fit] : fits) list.push_back(fit_json(size, fit, kind));
  }
  return list;
}

}  // namespace

double CostModel::allocated_bytes(double bytes) const {
  // Past 2^52 bytes a double no longer holds every size; nothing is that big.
  if (allocator == Allocator::exact || bytes <= 0 || bytes > 0x1p52) return bytes;
  return static_cast<double>(CpuAllocator::round_size(static_cast<size_t>(bytes)));
}

CostModel CostModel::from_json(const std::string& text) {
  nlohmann::json root = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  TESSERA_CHECK(!root.is_discarded() && root.is_object(),
                "[cost_model] the profile is not a JSON object");
  CostModel model;
  read_links(root, "links", [&](int64_t size, LinkModel fit, std::optional<Collective> kind) {
    model.set_link(size, fit, kind);
  });
  read_links(root, "inter_node_links",
             [&](int64_t size, LinkModel fit, std::optional<Collective> kind) {
               model.set_inter_node_link(size, fit, kind);
             });
  if (root.contains("ranks_per_node")) {
    const double ranks = positive(root, "ranks_per_node", "the profile");
    TESSERA_CHECK(ranks >= 1 && ranks == std::floor(ranks) && ranks < 1e9,
                  "[cost_model] ranks_per_node must be a positive integer, got ", ranks);
    model.ranks_per_node_ = static_cast<int64_t>(ranks);
  }
  if (root.contains("memory_bytes"))
    model.memory_bytes = positive(root, "memory_bytes", "the profile");
  if (root.contains("peak_flops_per_second")) {
    model.peak_flops_per_second = positive(root, "peak_flops_per_second", "the profile");
  }
  if (root.contains("overlaps_communication")) {
    TESSERA_CHECK(root["overlaps_communication"].is_boolean(),
                  "[cost_model] 'overlaps_communication' must be true or false");
    model.overlaps_communication = root["overlaps_communication"].get<bool>();
  }
  if (root.contains("allocator")) {
    const nlohmann::json& allocator = root["allocator"];
    TESSERA_CHECK(allocator.is_string() && (allocator == "cpu" || allocator == "exact"),
                  "[cost_model] 'allocator' must be \"cpu\" or \"exact\", got ", allocator.dump());
    model.allocator = allocator == "cpu" ? Allocator::cpu : Allocator::exact;
  }
  for (const char* field : {"name", "sources"}) {
    if (!root.contains(field)) continue;
    TESSERA_CHECK(root[field].is_string(), "[cost_model] '", field, "' must be a string");
    (std::string(field) == "name" ? model.name : model.sources) = root[field].get<std::string>();
  }
  if (root.contains("compute")) model.set_compute(read_rates(root["compute"], "'compute'"));
  if (root.contains("compute_by_kind")) {
    const nlohmann::json& kinds = root["compute_by_kind"];
    TESSERA_CHECK(kinds.is_object(), "[cost_model] 'compute_by_kind' must be an object");
    for (const auto& [name, rates] : kinds.items()) {
      auto kind = kind_names().find(name);
      TESSERA_CHECK(kind != kind_names().end(), "[cost_model] 'compute_by_kind' has '", name,
                    "', which is not an op kind (matmul, convolution, elementwise, ...)");
      model.set_compute(kind->second, read_rates(rates, "'compute_by_kind." + name + "'"));
    }
  }
  return model;
}

std::string CostModel::to_json() const {
  nlohmann::json root;
  if (!name.empty()) root["name"] = name;
  if (!sources.empty()) root["sources"] = sources;
  if (memory_bytes > 0) root["memory_bytes"] = memory_bytes;
  if (peak_flops_per_second > 0) root["peak_flops_per_second"] = peak_flops_per_second;
  if (ranks_per_node_ > 0) root["ranks_per_node"] = ranks_per_node_;
  root["overlaps_communication"] = overlaps_communication;
  root["allocator"] = allocator == Allocator::cpu ? "cpu" : "exact";
  root["links"] = links_json(links_.any, links_.by_kind);
  if (!inter_links_.empty())
    root["inter_node_links"] = links_json(inter_links_.any, inter_links_.by_kind);
  auto rates_json = [](const ComputeModel& rates) {
    return nlohmann::json{{"flops_per_second", rates.flops_per_second},
                          {"bytes_per_second", rates.bytes_per_second},
                          {"seconds_per_call", rates.seconds_per_call}};
  };
  root["compute"] = rates_json(compute_);
  for (const auto& [kind, rates] : kinds_) {
    root["compute_by_kind"][op_kind_name(kind)] = rates_json(rates);
  }
  return root.dump(2) + "\n";
}

CostModel CostModel::from_file(const std::string& path) {
  const std::string text = read_regular_file(path, "cost_model", uint64_t{64} << 20);
  try {
    return from_json(text);
  } catch (const Error& error) {
    TESSERA_CHECK(false, error.what(), " (in the profile '", path, "')");
  }
  return {};  // unreachable
}

const CostModel& default_cost_model() {
  static const CostModel model = [] {
    const char* path = std::getenv("TESSERA_COST_PROFILE");
    if (path == nullptr || *path == '\0') return CostModel();
    return CostModel::from_file(path);
  }();
  return model;
}

}  // namespace tessera::global
