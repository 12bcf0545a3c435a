#pragma once

#include <memory>
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

// How gradients reach global leaves; installed by tessera/global.
struct GlobalGradHooks {
  // Boxes `gradient` to the leaf's layout and adds it to leaf->grad,
  // possibly later (partial sums wait in buckets so that one all-reduce
  // serves several leaves) or on a communication thread. Returns false when
  // the engine should accumulate it itself.
  bool (*accumulate)(const std::shared_ptr<TensorImpl>& leaf, const Tensor& gradient) = nullptr;
  // Finishes every accumulation handed over above (reduces the open buckets,
  // waits for the communication thread); rethrows the first error. With
  // `failed` (backward threw) the buckets are dropped instead of reduced,
  // since ranks may not agree on them.
  void (*finish)(bool failed) = nullptr;
};
void set_global_grad_hooks(GlobalGradHooks hooks);

}  // namespace tessera
