#pragma once

// std::cout << x, as PyTorch prints a tensor: nested rows, `precision`
// decimals, and beyond `threshold` elements only the first and last
// `edgeitems` of each dimension, with "...".

#include <cstdint>
#include <ostream>

#include "tessera/core/tensor.h"

namespace tessera {

struct PrintOptions {
  int precision = 4;
  int64_t threshold = 1000;
  int64_t edgeitems = 3;
  int64_t linewidth = 80;
};

// Process-wide, as torch.set_printoptions.
void set_print_options(const PrintOptions& options);
PrintOptions print_options();

// "tensor([[1., 2.],\n        [3., 4.]], dtype=f64, requires_grad=True)":
// f32, i64 and bool print no dtype, as PyTorch's defaults; a global tensor
// prints its logical values (a collective) and its placement and SBP.
std::ostream& operator<<(std::ostream& out, const Tensor& tensor);

}  // namespace tessera
