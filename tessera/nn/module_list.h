#pragma once

#include <memory>
#include <vector>

#include "tessera/nn/module.h"

namespace tessera::nn {

// Holds submodules by index so their parameters are registered; the owner
// decides how to call them (PyTorch's ModuleList). Children are "0", "1", ...
class ModuleList : public Module {
 public:
  ModuleList() : Module("ModuleList") {}

  void push_back(std::shared_ptr<Module> module);
  size_t size() const { return modules_.size(); }
  const std::shared_ptr<Module>& operator[](size_t index) const;
  // The child at `index` as its concrete type (error if it is not one).
  template <typename M>
  std::shared_ptr<M> get(size_t index) const {
    auto typed = std::dynamic_pointer_cast<M>((*this)[index]);
    TESSERA_CHECK(typed != nullptr, "[ModuleList] element ", index, " is a ",
                  (*this)[index]->type_name(), ", not the requested type");
    return typed;
  }
  std::vector<std::shared_ptr<Module>>::const_iterator begin() const { return modules_.begin(); }
  std::vector<std::shared_ptr<Module>>::const_iterator end() const { return modules_.end(); }

 private:
  std::vector<std::shared_ptr<Module>> modules_;
};

}  // namespace tessera::nn
