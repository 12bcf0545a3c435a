#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "tessera/core/tensor.h"
#include "tessera/ops/attrs.h"
#include "tessera/ops/grad_context.h"

namespace tessera {

// Where the gradient of one input goes: into another node's output slot, or
// straight into a leaf tensor's .grad.
struct Edge {
  std::shared_ptr<Node> node;
  int output_nr = 0;
  std::shared_ptr<TensorImpl> leaf;
  bool active() const { return node != nullptr || leaf != nullptr; }
};

// One recorded op on the tape: what its gradient reads, where the input
// gradients go, and when it was recorded (later nodes run first).
class Node {
 public:
  Node() = default;
  // Releases the graph behind this node iteratively: a chain of a million
  // nodes (e.g. `running = running + loss` over an epoch) would otherwise
  // overflow the stack through nested destructors.
  ~Node();
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;

  SavedOp saved;
  std::vector<Edge> next_edges;  // one per input
  uint64_t sequence = 0;
};

// Records `op` on the autograd tape: a node whose gradient is op.grad, with
// edges to the inputs' nodes or leaves. The dispatcher calls it (installed
// as its tape recorder) for every differentiable call that needs a gradient.
void record_node(const OpDef& op, const TensorVector& inputs, const Attrs& attrs,
                 TensorVector& outputs);

}  // namespace tessera
