#pragma once

// Running a fused elementwise node (graph/ir.h FusedProgram): the chain of
// ops runs tile by tile over the output, each op through its tile kernel
// (ops/tile_kernels.h), so intermediates live in a cache-sized scratch
// buffer and only the node's outputs are written to memory.

#include "tessera/graph/ir.h"

namespace tessera::graph {

// Elements per tile: 8 KiB of f32, so the few scratch tiles a chain needs
// stay in the L1 cache of one core.
constexpr int64_t kFusedTile = 2048;
// The most operands one step may read.
constexpr size_t kMaxOperands = 4;
// The most dims of an operand that is broadcast to the output's shape.
constexpr size_t kMaxBroadcastDims = 8;

// Whether a node of `op` on these metas can be a step of a fused program:
// a tile kernel exists, and every operand is f32 on the CPU with a shape
// that broadcasts to the output's (a single element, a row, a column, or
// any other NumPy broadcast); a broadcast operand is gathered tile by tile,
// as is one with strides of its own (a transpose), without a copy.
bool fusible(const OpDef& op, const MetaVector& inputs, const MetaVector& outputs);

// Plans how the program runs: each step that is not a result gets a
// scratch tile, reused once no later step reads its value (a chain of any
// length needs two); and where the backend's chain kernel knows every op
// and each step reads inputs and at most the step before it, the chain it
// runs instead, with the value in registers (ops/tile_kernels.h).
void plan_program(FusedProgram& program);

// Runs `program` on `inputs`; the outputs get `outputs`' metas.
TensorVector run_fused(const FusedProgram& program, const TensorVector& inputs,
                       const MetaVector& outputs);
// The same into contiguous tensors the caller made (the executor's arena).
void run_fused_into(const FusedProgram& program, const TensorVector& inputs,
                    const TensorVector& outputs);

}  // namespace tessera::graph
