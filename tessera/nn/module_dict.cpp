#include "tessera/nn/module_dict.h"

namespace tessera::nn {

bool ModuleDict::contains(const std::string& key) const {
  for (const auto& [name, child] : named_children()) {
    if (name == key) return true;
  }
  return false;
}

const std::shared_ptr<Module>& ModuleDict::at(const std::string& key) const {
  for (const auto& [name, child] : named_children()) {
    if (name == key) return child;
  }
  std::string known;
  for (const auto& [name, child] : named_children()) known += (known.empty() ? "" : ", ") + name;
  TESSERA_FAIL("[ModuleDict] no module '", key, "'; keys are [", known, "]");
}

}  // namespace tessera::nn
