#include "tessera/nn/sequential.h"

#include <string>

namespace tessera::nn {

Sequential::Sequential(std::initializer_list<std::shared_ptr<Module>> modules)
    : Module("Sequential") {
  for (const auto& module : modules) push_back(module);
}

void Sequential::push_back(std::shared_ptr<Module> module) {
  add_module(std::to_string(modules_.size()), module);
  modules_.push_back(std::move(module));
}

Tensor Sequential::forward(const Tensor& x) {
  Tensor out = x;
  for (const auto& module : modules_) out = module->forward(out);
  return out;
}

const std::shared_ptr<Module>& Sequential::operator[](size_t index) const {
  TESSERA_CHECK(index < modules_.size(), "[Sequential] index ", index, " out of range for ",
                modules_.size(), " modules");
  return modules_[index];
}

}  // namespace tessera::nn
