#include "tessera/ops/grad_context.h"

#include "tessera/ops/creation.h"
#include "tessera/ops/op.h"

namespace tessera {

namespace {

// A saved tensor must still hold the values the forward pass used.
void check_unmodified(const SavedOp& saved, const Tensor& tensor, uint64_t saved_version,
                      const char* role, int index) {
  const uint64_t version = tensor.version();
  TESSERA_CHECK(version == saved_version,
                "[backward] one of the tensors needed for the gradient "
                "was modified by an in-place operation: ",
                role, " ", index, " of '", saved.op->name, "' (", dtype_name(tensor.dtype()), " ",
                shape_str(tensor.shape()), ") is at version ", version,
                " but was saved at version ", saved_version,
                "; modify a clone() instead, or modify it after backward()");
}

}  // namespace

GradContext::GradContext(const SavedOp& saved, std::vector<Tensor> grad_outputs, bool create_graph)
    : saved_(saved), grad_outputs_(std::move(grad_outputs)), create_graph_(create_graph) {
  grad_outputs_.resize(saved_.output_metas.size());
}

const Tensor& GradContext::grad_output(int i) const {
  const Tensor& given = grad_outputs_.at(static_cast<size_t>(i));
  if (given.defined()) return given;
  zeros_.resize(grad_outputs_.size());
  Tensor& zeros = zeros_[static_cast<size_t>(i)];
  if (!zeros.defined()) zeros = zeros_for(saved_.output_metas[static_cast<size_t>(i)]);
  return zeros;
}

const Tensor& GradContext::input(int i) const {
  TESSERA_CHECK(!saved_.released, "[backward] the graph through '", saved_.op->name,
                "' was already freed by an earlier backward; pass retain_graph=true to the "
                "first backward to backpropagate twice");
  TESSERA_CHECK(i < static_cast<int>(saved_.inputs.size()), "[", saved_.op->name,
                "] gradient reads input ", i, " but the op declares saves_inputs = false");
  check_unmodified(saved_, saved_.inputs[i], saved_.input_versions.at(i), "input", i);
  return saved_.inputs[i];
}

Tensor GradContext::output(int i) const {
  if (!create_graph_ && i < static_cast<int>(saved_.saved_outputs.size())) {
    check_unmodified(saved_, saved_.saved_outputs[i], saved_.output_versions.at(i), "output", i);
    return saved_.saved_outputs[i];
  }
  std::vector<Tensor> inputs;
  for (int k = 0; k < num_inputs(); ++k) inputs.push_back(input(k));
  return call(*saved_.op, inputs, saved_.attrs).at(i);
}

}  // namespace tessera
