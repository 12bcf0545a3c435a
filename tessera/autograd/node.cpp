#include "tessera/autograd/node.h"

#include <atomic>

#include "tessera/ops/op.h"

namespace tessera {

namespace {
std::atomic<uint64_t> next_sequence{0};
}

void record_node(const OpDef& op, const std::vector<Tensor>& inputs, const Attrs& attrs,
                 std::vector<Tensor>& outputs) {
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
  if (op.saves_inputs) saved.inputs = inputs;
  for (size_t i = 0; i < outputs.size(); ++i) {
    saved.output_metas.push_back(outputs[i].meta());
    if (op.saves_outputs) saved.saved_outputs.push_back(outputs[i].detach());
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
