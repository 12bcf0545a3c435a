#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "tessera/core/error.h"
#include "tessera/core/tensor.h"

namespace tessera {

// Named tensors in insertion order, like PyTorch's OrderedDict state dicts.
// Modules, optimizers and checkpoints all speak it: a checkpoint is one
// StateDict whose keys carry prefixes ("model.", "optim.").
class StateDict {
 public:
  using Entry = std::pair<std::string, Tensor>;

  void insert(const std::string& key, const Tensor& value) {
    TESSERA_CHECK(index_.find(key) == index_.end(), "[state_dict] duplicate key '", key, "'");
    index_.emplace(key, entries_.size());
    entries_.emplace_back(key, value);
  }
  // Inserts or replaces.
  void set(const std::string& key, const Tensor& value) {
    auto found = index_.find(key);
    if (found == index_.end()) {
      insert(key, value);
    } else {
      entries_[found->second].second = value;
    }
  }
  bool contains(const std::string& key) const { return index_.count(key) != 0; }
  const Tensor& at(const std::string& key) const {
    auto found = index_.find(key);
    TESSERA_CHECK(found != index_.end(), "[state_dict] no key '", key, "'");
    return entries_[found->second].second;
  }
  // Entries whose key starts with `prefix`, with the prefix removed.
  StateDict with_prefix_removed(const std::string& prefix) const {
    StateDict out;
    for (const auto& [key, value] : entries_) {
      if (key.compare(0, prefix.size(), prefix) == 0) out.insert(key.substr(prefix.size()), value);
    }
    return out;
  }
  // Adds every entry of `other` with `prefix` in front of its key.
  void merge(const StateDict& other, const std::string& prefix = "") {
    for (const auto& [key, value] : other) insert(prefix + key, value);
  }
  std::vector<std::string> keys() const {
    std::vector<std::string> out;
    out.reserve(entries_.size());
    for (const auto& entry : entries_) out.push_back(entry.first);
    return out;
  }

  size_t size() const { return entries_.size(); }
  bool empty() const { return entries_.empty(); }
  std::vector<Entry>::const_iterator begin() const { return entries_.begin(); }
  std::vector<Entry>::const_iterator end() const { return entries_.end(); }

 private:
  std::vector<Entry> entries_;
  std::unordered_map<std::string, size_t> index_;
};

}  // namespace tessera
