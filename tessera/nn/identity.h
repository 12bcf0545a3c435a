#pragma once

#include "tessera/nn/module.h"

namespace tessera::nn {

// Returns its input unchanged, as torch.nn.Identity: a placeholder where a
// layer is optional (a projection that a configuration leaves out).
class Identity : public Module {
 public:
  Identity() : Module("Identity") {}
  Tensor forward(const Tensor& x) override { return x; }
};

}  // namespace tessera::nn
