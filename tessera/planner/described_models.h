#pragma once

// Training steps described by a few numbers, traced on meta tensors: no
// parameter or activation is allocated, so tessera-plan can plan a 7B- or
// 175B-parameter model on a laptop (DESIGN §8, planning without the
// hardware).

#include <cstdint>

#include "tessera/graph/ir.h"
#include "tessera/nn/module.h"

namespace tessera::planner {

// A decoder-only transformer as models::GPT builds it (pre-norm blocks of
// causal self-attention and a 4x GELU MLP, learned positions, an untied
// head), trained with cross-entropy on `batch` sequences of `sequence`
// tokens.
struct GptSpec {
  int64_t layers = 4;
  int64_t d_model = 256;
  int64_t heads = 4;
  int64_t vocab = 256;
  int64_t sequence = 128;
  int64_t batch = 8;
  DType dtype = DType::f32;
};

// Parameters, embeddings and head included.
int64_t gpt_parameters(const GptSpec& spec);

// The traced step (forward, loss, backward) and its parameters' names
// ("blocks.3.attn.q.weight", ...). Raises naming the field when the spec
// does not describe a model (heads not dividing d_model, sizes below 1).
graph::Graph trace_gpt_step(const GptSpec& spec, nn::Module::NamedTensors& names);

// One pipeline stage of that model: blocks [first_layer, first_layer +
// layers), after the embeddings on the first stage and before the final
// norm, head and loss on the last. A stage's step runs one micro-batch
// (spec.batch sequences) forward and backward:
//   first stage:  inputs (tokens, gradient of its output); outputs (its output)
//   middle stage: inputs (activation, gradient of its output);
//                 outputs (its output, gradient of the activation)
//   last stage:   inputs (activation, targets); outputs (loss, gradient of the activation)
// The step's first output is where its forward pass ends. A stage that is
// both first and last is trace_gpt_step's whole step.
struct GptStage {
  int64_t first_layer = 0;
  int64_t layers = 0;
  bool first = true;
  bool last = true;
};
graph::Graph trace_gpt_stage(const GptSpec& spec, const GptStage& stage,
                             nn::Module::NamedTensors& names);

}  // namespace tessera::planner
