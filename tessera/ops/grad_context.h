#pragma once

// What an op's gradient function sees: the forward call's inputs, attributes
// and outputs, and the gradients flowing into its outputs.

#include <vector>

#include "tessera/core/tensor.h"
#include "tessera/ops/attrs.h"

namespace tessera {

struct OpDef;

// The part of a recorded op that its gradient reads.
struct SavedOp {
  const OpDef* op = nullptr;
  Attrs attrs;
  MetaVector input_metas;
  std::vector<Tensor> inputs;         // empty when the op saves none
  std::vector<Tensor> saved_outputs;  // detached aliases, when the op saves them
  // Tensor::version() of each saved tensor when it was saved.
  std::vector<uint64_t> input_versions;
  std::vector<uint64_t> output_versions;
  MetaVector output_metas;
  std::vector<bool> input_needs_grad;
  bool released = false;  // saved tensors freed after a backward
};

class GradContext {
 public:
  GradContext(const SavedOp& saved, std::vector<Tensor> grad_outputs, bool create_graph);

  const Attrs& attrs() const { return saved_.attrs; }
  int num_inputs() const { return static_cast<int>(saved_.input_metas.size()); }
  const TensorMeta& input_meta(int i) const { return saved_.input_metas.at(i); }
  const TensorMeta& output_meta(int i) const { return saved_.output_metas.at(i); }
  const Tensor& input(int i) const;
  // Output i of the forward op: the saved one, or recomputed from the inputs
  // when the gradient itself is being recorded (create_graph), so that
  // higher-order gradients see its dependence on the inputs.
  Tensor output(int i) const;
  // Gradient flowing into output i; zeros (made on first read) when that
  // output got none.
  const Tensor& grad_output(int i) const;
  // Whether output i got a gradient. A gradient function skips the terms
  // of outputs that got none (layer_norm's mean and rstd, which only a
  // higher-order gradient reaches) instead of reading their zeros, which
  // would cost kernels and a trace's nodes for nothing.
  bool has_grad_output(int i) const { return grad_outputs_.at(i).defined(); }
  bool needs_input_grad(int i) const { return saved_.input_needs_grad.at(i); }

 private:
  const SavedOp& saved_;
  std::vector<Tensor> grad_outputs_;
  mutable std::vector<Tensor> zeros_;  // grad_output() of outputs that got none
  bool create_graph_;
};

}  // namespace tessera
