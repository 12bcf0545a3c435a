#include "tessera/nn/module_list.h"

#include <string>

namespace tessera::nn {

void ModuleList::push_back(std::shared_ptr<Module> module) {
  add_module(std::to_string(modules_.size()), module);
  modules_.push_back(std::move(module));
}

const std::shared_ptr<Module>& ModuleList::operator[](size_t index) const {
  TESSERA_CHECK(index < modules_.size(), "[ModuleList] index ", index, " out of range for ",
                modules_.size(), " modules");
  return modules_[index];
}

}  // namespace tessera::nn
