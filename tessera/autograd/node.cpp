#include "tessera/autograd/node.h"

#include <atomic>

#include "tessera/ops/dispatch.h"

namespace tessera {

namespace {

std::atomic<uint64_t> next_sequence{0};

const bool installed = [] {
  set_tape_recorder(&record_node);
  return true;
}();

// Moves out of `node` every reference to another node that would be dropped
// with it: its edges, and the grad_fn of saved tensors that only it holds.
void take_references(Node& node, std::vector<std::shared_ptr<Node>>& pending) {
  for (Edge& edge : node.next_edges) {
    if (edge.node) pending.push_back(std::move(edge.node));
  }
  for (Tensor& input : node.saved.inputs) {
    const std::shared_ptr<TensorImpl>& impl = input.impl_ptr();
    if (!impl || impl.use_count() != 1) continue;
    if (impl->grad_fn) pending.push_back(std::move(impl->grad_fn));
    // A saved view keeps its base alive, and with it the base's grad_fn.
    if (impl->view_base && impl->view_base.use_count() == 1 && impl->view_base->grad_fn) {
      pending.push_back(std::move(impl->view_base->grad_fn));
    }
  }
}

}  // namespace

Node::~Node() {
  std::vector<std::shared_ptr<Node>> pending;
  take_references(*this, pending);
  while (!pending.empty()) {
    std::shared_ptr<Node> node = std::move(pending.back());
    pending.pop_back();
    // The last owner empties the node before it dies, so its own destructor
    // finds nothing to recurse into.
    if (node.use_count() == 1) take_references(*node, pending);
  }
}

void record_node(const OpDef& op, const TensorVector& inputs, const Attrs& attrs,
                 TensorVector& outputs) {
  auto node = std::make_shared<Node>();
  SavedOp& saved = node->saved;
  saved.op = &op;
  saved.attrs = attrs;
  node->sequence = next_sequence.fetch_add(1);
  saved.input_metas.reserve(inputs.size());
  node->next_edges.reserve(inputs.size());
  for (const Tensor& input : inputs) {
    saved.input_metas.push_back(input.meta());
    Edge edge;
    if (input.requires_grad()) {
      if (input.grad_fn()) {
        edge.node = input.grad_fn();
        edge.output_nr = input.impl().output_nr;
      } else {
        edge.leaf = input.impl_ptr();
      }
    }
    saved.input_needs_grad.push_back(edge.active());
    node->next_edges.push_back(std::move(edge));
  }
  if (op.saves_inputs) {
    saved.inputs = inputs;
    for (const Tensor& input : inputs) saved.input_versions.push_back(input.version());
  }
  for (size_t i = 0; i < outputs.size(); ++i) {
    saved.output_metas.push_back(outputs[i].meta());
    if (op.saves_outputs) {
      saved.saved_outputs.push_back(outputs[i].detach());
      saved.output_versions.push_back(outputs[i].version());
    }
  }
  for (size_t i = 0; i < outputs.size(); ++i) {
    if (!is_floating(outputs[i].dtype())) continue;
    TensorImpl& impl = outputs[i].impl();
    impl.requires_grad = true;
    impl.grad_fn = node;
    impl.output_nr = static_cast<int>(i);
  }
}

}  // namespace tessera
