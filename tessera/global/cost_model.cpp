#include "tessera/global/cost_model.h"

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

namespace tessera::global {

const char* collective_name(Collective kind) {
  switch (kind) {
    case Collective::all_reduce:
      return "all-reduce";
    case Collective::reduce_scatter:
      return "reduce-scatter";
    case Collective::all_gather:
      return "all-gather";
    case Collective::all_to_all:
      return "all-to-all";
    case Collective::broadcast:
      return "broadcast";
  }
  return "collective";
}

LinkModel CostModel::link(int64_t group_size) const {
  if (links_.empty()) return LinkModel{};
  auto above = links_.lower_bound(group_size);
  if (above == links_.end()) return std::prev(above)->second;
  if (above == links_.begin() || above->first == group_size) return above->second;
  auto below = std::prev(above);
  return group_size - below->first <= above->first - group_size ? below->second : above->second;
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

double CostModel::collective_seconds(Collective kind, double payload_bytes,
                                     int64_t group_size) const {
  if (group_size <= 1) return 0;
  const LinkModel fit = link(group_size);
  return fit.alpha_seconds + link_bytes(kind, payload_bytes, group_size) * fit.seconds_per_byte;
}

double CostModel::transfer_seconds(double bytes, int64_t group_size) const {
  const LinkModel fit = link(group_size);
  return fit.alpha_seconds + bytes * fit.seconds_per_byte;
}

double CostModel::copy_seconds(double bytes) const {
  return 2 * bytes / compute_.bytes_per_second;
}

double CostModel::compute_seconds(const OpCost& cost) const {
  return std::max(cost.flops / compute_.flops_per_second, cost.bytes / compute_.bytes_per_second);
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

CostModel CostModel::from_json(const std::string& text) {
  nlohmann::json root = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  TESSERA_CHECK(!root.is_discarded() && root.is_object(),
                "[cost_model] the profile is not a JSON object");
  CostModel model;
  if (root.contains("links")) {
    TESSERA_CHECK(root["links"].is_array(), "[cost_model] 'links' must be an array");
    for (const nlohmann::json& entry : root["links"]) {
      const double size = positive(entry, "group_size", "a link entry");
      TESSERA_CHECK(size >= 2 && size == std::floor(size),
                    "[cost_model] a link entry's group_size must be an integer >= 2, got ", size);
      model.set_link(static_cast<int64_t>(size),
                     LinkModel{positive(entry, "alpha_seconds", "a link entry"),
                               positive(entry, "seconds_per_byte", "a link entry")});
    }
  }
  if (root.contains("compute")) {
    const nlohmann::json& compute = root["compute"];
    ComputeModel rates{positive(compute, "flops_per_second", "'compute'"),
                       positive(compute, "bytes_per_second", "'compute'")};
    TESSERA_CHECK(rates.flops_per_second > 0 && rates.bytes_per_second > 0,
                  "[cost_model] 'compute' rates must be positive");
    model.set_compute(rates);
  }
  return model;
}

const CostModel& default_cost_model() {
  static const CostModel model = [] {
    const char* path = std::getenv("TESSERA_COST_PROFILE");
    if (path == nullptr || *path == '\0') return CostModel();
    std::ifstream file(path);
    TESSERA_CHECK(file.good(), "[cost_model] cannot read TESSERA_COST_PROFILE file '", path, "'");
    std::stringstream text;
    text << file.rdbuf();
    return CostModel::from_json(text.str());
  }();
  return model;
}

}  // namespace tessera::global
