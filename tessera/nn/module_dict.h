#pragma once

#include <memory>
#include <string>

#include "tessera/nn/module.h"

namespace tessera::nn {

// Holds submodules by name, in insertion order (PyTorch's ModuleDict).
class ModuleDict : public Module {
 public:
  ModuleDict() : Module("ModuleDict") {}

  void insert(const std::string& key, std::shared_ptr<Module> module) { add_module(key, module); }
  bool contains(const std::string& key) const;
  const std::shared_ptr<Module>& at(const std::string& key) const;
  size_t size() const { return named_children().size(); }
};

}  // namespace tessera::nn
