#pragma once

#include <bit>
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "tessera/core/dtype.h"
#include "tessera/core/error.h"

namespace tessera {

using AttrValue = std::variant<int64_t, double, bool, std::vector<int64_t>, DType, std::string>;

// Named, non-tensor arguments of an op call (dims, eps, dtype, ...). A short
// vector: ops have a handful of attributes and lookups are by literal name.
class Attrs {
 public:
  Attrs() = default;
  Attrs(std::initializer_list<std::pair<std::string, AttrValue>> items) : items_(items) {}

  Attrs& set(const std::string& name, AttrValue value) {
    for (auto& item : items_) {
      if (item.first == name) {
        item.second = std::move(value);
        return *this;
      }
    }
    items_.emplace_back(name, std::move(value));
    return *this;
  }
  // Removes `name` if present.
  Attrs& erase(const std::string& name) {
    std::erase_if(items_, [&](const auto& item) { return item.first == name; });
    return *this;
  }
  bool has(const std::string& name) const {
    for (const auto& item : items_) {
      if (item.first == name) return true;
    }
    return false;
  }
  template <typename T>
  const T& get(const std::string& name) const {
    for (const auto& item : items_) {
      if (item.first == name) {
        const T* value = std::get_if<T>(&item.second);
        TESSERA_CHECK(value != nullptr, "[attrs] attribute '", name, "' has another type");
        return *value;
      }
    }
    TESSERA_FAIL("[attrs] missing attribute '", name, "'");
  }
  int64_t i(const std::string& name) const { return get<int64_t>(name); }
  double f(const std::string& name) const { return get<double>(name); }
  bool b(const std::string& name) const { return get<bool>(name); }
  const std::vector<int64_t>& ints(const std::string& name) const {
    return get<std::vector<int64_t>>(name);
  }
  const std::vector<std::pair<std::string, AttrValue>>& items() const { return items_; }

  // Equal when both hold the same names with the same values, in any order.
  // Doubles compare by their bits (NaN equals NaN; 0.0 and -0.0 differ), as
  // plan caches and common-subexpression elimination need.
  bool operator==(const Attrs& other) const {
    if (items_.size() != other.items_.size()) return false;
    for (const auto& [name, value] : items_) {
      const AttrValue* theirs = other.find(name);
      if (theirs == nullptr || !same_value(value, *theirs)) return false;
    }
    return true;
  }
  // Consistent with ==: independent of the order of the items.
  size_t hash() const {
    size_t total = items_.size();
    for (const auto& [name, value] : items_) {
      size_t item = std::hash<std::string>()(name) * 31 + value.index();
      std::visit([&](const auto& v) { item = item * 1000003 ^ value_hash(v); }, value);
      total += item * 0x9e3779b97f4a7c15ULL;
    }
    return total;
  }

 private:
  const AttrValue* find(const std::string& name) const {
    for (const auto& item : items_) {
      if (item.first == name) return &item.second;
    }
    return nullptr;
  }
  static bool same_value(const AttrValue& a, const AttrValue& b) {
    if (a.index() != b.index()) return false;
    if (const double* x = std::get_if<double>(&a)) {
      return std::bit_cast<uint64_t>(*x) == std::bit_cast<uint64_t>(std::get<double>(b));
    }
    return a == b;
  }
  static size_t value_hash(int64_t v) { return std::hash<int64_t>()(v); }
  static size_t value_hash(double v) { return std::hash<uint64_t>()(std::bit_cast<uint64_t>(v)); }
  static size_t value_hash(bool v) { return v ? 1 : 2; }
  static size_t value_hash(DType v) { return static_cast<size_t>(v) + 17; }
  static size_t value_hash(const std::string& v) { return std::hash<std::string>()(v); }
  static size_t value_hash(const std::vector<int64_t>& v) {
    size_t h = v.size();
    for (int64_t x : v) h = h * 1000003 ^ std::hash<int64_t>()(x);
    return h;
  }

  std::vector<std::pair<std::string, AttrValue>> items_;
};

}  // namespace tessera

template <>
struct std::hash<tessera::Attrs> {
  size_t operator()(const tessera::Attrs& attrs) const { return attrs.hash(); }
};
