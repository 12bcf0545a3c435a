#include "tessera/nn/softmax.h"

#include "tessera/ops/softmax.h"

namespace tessera::nn {

Tensor Softmax::forward(const Tensor& x) { return softmax(x, dim_); }

Tensor LogSoftmax::forward(const Tensor& x) { return log_softmax(x, dim_); }

}  // namespace tessera::nn
