#include "tessera/graph/fused.h"

#include <algorithm>
#include <vector>

#include "tessera/core/thread_pool.h"
#include "tessera/ops/tile_kernels.h"

namespace tessera::graph {

bool fusible(const OpDef& op, const MetaVector& inputs, const MetaVector& outputs) {
  if (op.kind != OpKind::elementwise || !op.writes.empty() || outputs.size() != 1 ||
      inputs.empty() || inputs.size() > kMaxOperands || tile_kernel(op.name) == nullptr) {
    return false;
  }
  const TensorMeta& out = outputs[0];
  if (out.dtype != DType::f32 || out.device != Device{} || out.is_global()) return false;
  for (const TensorMeta& in : inputs) {
    const bool scalar = numel(in.shape) == 1;
    if (in.dtype != DType::f32 || in.is_global() || (in.device != Device{} && !scalar))
      return false;
    if (in.shape != out.shape && !scalar) return false;
  }
  return true;
}

void assign_scratch(FusedProgram& program) {
  const size_t steps = program.steps.size();
  std::vector<bool> is_result(steps, false);
  for (int result : program.results) is_result[static_cast<size_t>(result)] = true;
  std::vector<size_t> last_read(steps, 0);
  for (size_t s = 0; s < steps; ++s) {
    for (int operand : program.steps[s].operands) {
      if (operand >= program.num_inputs)
        last_read[static_cast<size_t>(operand - program.num_inputs)] = s;
    }
  }
  program.scratch_slot.assign(steps, -1);
  program.num_slots = 0;
  std::vector<int> free_slots;
  std::vector<std::vector<int>> freed_after(steps);  // slots free once step s has run
  for (size_t s = 0; s < steps; ++s) {
    if (!is_result[s]) {
      int slot = -1;
      if (!free_slots.empty()) {
        slot = free_slots.back();
        free_slots.pop_back();
      } else {
        slot = program.num_slots++;
      }
      program.scratch_slot[s] = slot;
      freed_after[std::max(last_read[s], s)].push_back(slot);
    }
    // A step never writes a tile it reads: the slots its operands held
    // come free only after it.
    for (int slot : freed_after[s]) free_slots.push_back(slot);
  }
}

TensorVector run_fused(const FusedProgram& program, const TensorVector& inputs,
                       const MetaVector& outputs) {
  TensorVector results;
  for (const TensorMeta& meta : outputs)
    results.push_back(Tensor::empty(meta.shape, meta.dtype, meta.device));
  run_fused_into(program, inputs, results);
  return results;
}

void run_fused_into(const FusedProgram& program, const TensorVector& inputs,
                    const TensorVector& results) {
  TESSERA_CHECK(inputs.size() == static_cast<size_t>(program.num_inputs) &&
                    results.size() == program.results.size(),
                "[fused_elementwise] the program takes ", program.num_inputs, " inputs and makes ",
                program.results.size(), " outputs, got ", inputs.size(), " and ", results.size());
  TESSERA_CHECK(program.scratch_slot.size() == program.steps.size(), "[fused_elementwise] ",
                "the program has no scratch plan (assign_scratch)");
  const int64_t n = results.at(0).numel();
  // Operand pointers: inputs made contiguous, and which are one element.
  TensorVector dense;
  std::vector<const float*> input_data;
  std::vector<bool> input_scalar;
  for (const Tensor& input : inputs) {
    dense.push_back(input.is_contiguous() ? input : input.contiguous());
    input_data.push_back(static_cast<const float*>(dense.back().raw_data()));
    input_scalar.push_back(input.numel() == 1 && n != 1);
  }
  std::vector<int> result_of_step(program.steps.size(), -1);
  for (size_t o = 0; o < results.size(); ++o) {
    TESSERA_CHECK(results[o].is_contiguous() && results[o].numel() == n, "[fused_elementwise] ",
                  "output ", o, " must be contiguous with ", n, " elements");
    result_of_step[static_cast<size_t>(program.results[o])] = static_cast<int>(o);
  }
  std::vector<float*> result_data;
  for (const Tensor& result : results)
    result_data.push_back(static_cast<float*>(result.raw_data()));

  const int64_t tiles = (n + kFusedTile - 1) / kFusedTile;
  const size_t num_steps = program.steps.size();
  const int64_t grain = std::max<int64_t>(1, kElementwiseGrain / kFusedTile);
  parallel_for(0, tiles, grain, [&](int64_t first, int64_t last) {
    // The thread's scratch: one tile per step (the outputs' steps write to
    // the outputs instead), kept between runs.
    thread_local std::vector<float> scratch;
    thread_local std::vector<const float*> step_data;
    scratch.resize(static_cast<size_t>(program.num_slots) * static_cast<size_t>(kFusedTile));
    step_data.resize(num_steps);
    const float* operands[kMaxOperands];
    bool operand_scalar[kMaxOperands];
    for (int64_t tile = first; tile < last; ++tile) {
      const int64_t begin = tile * kFusedTile;
      const int64_t count = std::min(kFusedTile, n - begin);
      for (size_t s = 0; s < num_steps; ++s) {
        const FusedStep& step = program.steps[s];
        for (size_t i = 0; i < step.operands.size(); ++i) {
          const int operand = step.operands[i];
          if (operand < program.num_inputs) {
            const auto k = static_cast<size_t>(operand);
            operands[i] = input_scalar[k] ? input_data[k] : input_data[k] + begin;
            operand_scalar[i] = input_scalar[k];
          } else {
            operands[i] = step_data[static_cast<size_t>(operand - program.num_inputs)];
            operand_scalar[i] = false;
          }
        }
        const int result = result_of_step[s];
        float* out = result >= 0 ? result_data[static_cast<size_t>(result)] + begin
                                 : scratch.data() + static_cast<size_t>(program.scratch_slot[s]) *
                                                        static_cast<size_t>(kFusedTile);
        step.kernel(step.attrs, {operands, operand_scalar, out, count});
        step_data[s] = out;
      }
    }
  });
}

}  // namespace tessera::graph
