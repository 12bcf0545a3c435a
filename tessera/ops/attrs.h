#pragma once

#include <cstdint>
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

 private:
  std::vector<std::pair<std::string, AttrValue>> items_;
};

}  // namespace tessera
