#include "tessera/nn/dropout.h"

#include "tessera/ops/dropout.h"

namespace tessera::nn {

Dropout::Dropout(double p) : Module("Dropout"), p_(p) {
  TESSERA_CHECK(p >= 0.0 && p <= 1.0, "[Dropout] p must be in [0, 1], got ", p);
}

Tensor Dropout::forward(const Tensor& x) {
  if (!is_training() || p_ == 0.0) return x;
  return dropout(x, p_, true);
}

}  // namespace tessera::nn
