#pragma once

#include <initializer_list>
#include <memory>
#include <vector>

#include "tessera/nn/module.h"

namespace tessera::nn {

// Runs its children in order, each on the previous one's output. Children
// are named "0", "1", ... as in PyTorch.
class Sequential : public Module {
 public:
  Sequential() : Module("Sequential") {}
  Sequential(std::initializer_list<std::shared_ptr<Module>> modules);

  void push_back(std::shared_ptr<Module> module);
  Tensor forward(const Tensor& x) override;

  size_t size() const { return modules_.size(); }
  const std::shared_ptr<Module>& operator[](size_t index) const;

 private:
  std::vector<std::shared_ptr<Module>> modules_;
};

}  // namespace tessera::nn
