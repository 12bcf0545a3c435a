#pragma once

#include <vector>

#include "tessera/core/tensor.h"

namespace tessera {

// Backpropagates from `roots` (each with its seed gradient; undefined means
// ones for a one-element root) and accumulates into leaves' .grad.
void run_backward(const std::vector<Tensor>& roots, const std::vector<Tensor>& root_grads,
                  bool retain_graph, bool create_graph);

// Returns d(sum of outputs·grad_outputs)/d(inputs) without touching .grad
// (like torch.autograd.grad). An input the outputs do not depend on gets an
// undefined tensor unless allow_unused is false, which throws.
std::vector<Tensor> grad(const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                         const std::vector<Tensor>& grad_outputs = {}, bool retain_graph = false,
                         bool create_graph = false, bool allow_unused = false);

}  // namespace tessera
