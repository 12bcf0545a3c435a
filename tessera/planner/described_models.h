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

}  // namespace tessera::planner
