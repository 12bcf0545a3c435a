#include "tessera/graph/fused.h"

#include <algorithm>
#include <memory>
#include <vector>

#include "tessera/core/thread_pool.h"
#include "tessera/ops/tile_kernels.h"

namespace tessera::graph {

namespace {

// Whether `in` broadcasts to `out` by NumPy's rules: aligned at the last
// dim, each of its dims equal to the output's or 1.
bool broadcasts_to(const Shape& in, const Shape& out) {
  if (in.size() > out.size()) return false;
  const size_t lead = out.size() - in.size();
  for (size_t d = 0; d < in.size(); ++d) {
    if (in[d] != 1 && in[d] != out[lead + d]) return false;
  }
  return true;
}

// Where each element of an operand comes from: the output's dims,
// outermost first, each with the operand's stride along it (0 where it is
// broadcast). Dims of one element are dropped and neighbours that step
// through the operand alike are merged, so a row [N] against [B, N] is
// {B, N} with strides {0, 1}, a column [B, 1] is {B, N} with {1, 0}, and a
// transposed [N, B] read as [B, N] is {B, N} with {1, B}.
struct OperandMap {
  std::vector<int64_t> sizes, strides;
};

OperandMap operand_map(const Tensor& in, const Shape& out) {
  const Shape& shape = in.shape();
  const size_t lead = out.size() - shape.size();
  std::vector<int64_t> in_strides(out.size(), 0);
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] != 1) in_strides[lead + d] = in.strides()[d];
  }
  OperandMap map;
  for (size_t d = 0; d < out.size(); ++d) {
    if (out[d] == 1) continue;
    if (!map.sizes.empty() && map.strides.back() == in_strides[d] * out[d]) {
      map.sizes.back() *= out[d];  // steps on as the dim inside it does: one dim
      map.strides.back() = in_strides[d];
    } else {
      map.sizes.push_back(out[d]);
      map.strides.push_back(in_strides[d]);
    }
  }
  return map;
}

// Writes elements [begin, begin + count) of a broadcast or strided operand,
// in the output's order, to `dst`: runs along the innermost dim, each a
// copy, a fill or a strided read.
void gather_operand(const float* data, const OperandMap& map, int64_t begin, int64_t count,
                    float* dst) {
  const size_t dims = map.sizes.size();
  if (dims == 0) {
    std::fill(dst, dst + count, data[0]);
    return;
  }
  int64_t index[kMaxBroadcastDims];
  int64_t offset = 0;
  int64_t rest = begin;
  for (size_t d = dims; d-- > 0;) {
    index[d] = rest % map.sizes[d];
    rest /= map.sizes[d];
    offset += index[d] * map.strides[d];
  }
  const size_t inner = dims - 1;
  const int64_t inner_stride = map.strides[inner];
  while (count > 0) {
    const int64_t run = std::min(count, map.sizes[inner] - index[inner]);
    if (inner_stride == 0) {
      std::fill(dst, dst + run, data[offset]);
    } else if (inner_stride == 1) {
      std::copy(data + offset, data + offset + run, dst);
    } else {
      for (int64_t i = 0; i < run; ++i) dst[i] = data[offset + i * inner_stride];
    }
    dst += run;
    count -= run;
    offset += run * inner_stride;
    index[inner] += run;
    // Carry into the outer dims.
    for (size_t d = inner; d > 0 && index[d] == map.sizes[d]; --d) {
      offset -= index[d] * map.strides[d];
      index[d] = 0;
      ++index[d - 1];
      offset += map.strides[d - 1];
    }
  }
}

// The program as the backend's chain kernel runs it, or empty when it is not
// a chain the kernel knows: every op has an id, and each step reads inputs
// and at most the step before it (a value read further on would need memory
// between steps). `out` is filled in per tile.
std::vector<ChainStep> as_chain(const FusedProgram& program) {
  const ChainKernel kernel = chain_kernel();
  if (kernel.op == nullptr || program.steps.size() > kMaxChainSteps) return {};
  std::vector<ChainStep> chain;
  for (size_t s = 0; s < program.steps.size(); ++s) {
    const FusedStep& step = program.steps[s];
    ChainStep link{
        kernel.op(step.op->name), static_cast<int>(step.operands.size()), {-1, -1}, nullptr};
    if (link.op < 0 || link.arity < 1 || link.arity > 2) return {};
    for (int i = 0; i < link.arity; ++i) {
      const int operand = step.operands[static_cast<size_t>(i)];
      if (operand < program.num_inputs) {
        link.operands[i] = operand;
      } else if (s == 0 || operand - program.num_inputs != static_cast<int>(s) - 1) {
        return {};
      }
    }
    chain.push_back(link);
  }
  return chain;
}

}  // namespace

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
    const bool full = in.shape == out.shape;
    if (!scalar && !full &&
        (!broadcasts_to(in.shape, out.shape) || out.shape.size() > kMaxBroadcastDims)) {
      return false;
    }
  }
  return true;
}

void plan_program(FusedProgram& program) {
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
  program.chain = as_chain(program);
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
                "the program has no plan (plan_program)");
  const int64_t n = results.at(0).numel();
  const Shape& shape = results.at(0).shape();
  // Operand pointers, and which are one element. An input laid out as the
  // output (contiguous, all of its elements) is read in place; a broadcast
  // or strided one is gathered into a tile of its own as each tile runs
  // (no copy of it is made, so a run allocates nothing): its map, and which
  // tile it has (-1: none).
  std::vector<const float*> input_data;
  const std::unique_ptr<bool[]> input_scalar(new bool[inputs.size()]);
  std::vector<OperandMap> gathered_maps;
  std::vector<int> gathered_tile;
  for (size_t k = 0; k < inputs.size(); ++k) {
    const Tensor& input = inputs[k];
    input_data.push_back(static_cast<const float*>(input.raw_data()));
    input_scalar[k] = input.numel() == 1 && n != 1;
    const bool in_place = input.numel() == n && input.is_contiguous();
    const bool gathered = !in_place && !input_scalar[k];
    if (gathered) {
      TESSERA_CHECK(broadcasts_to(input.shape(), shape) &&
                        results[0].dim() <= static_cast<int64_t>(kMaxBroadcastDims),
                    "[fused_elementwise] an input of shape ", shape_str(input.shape()),
                    " does not broadcast to the output's ", shape_str(shape));
      gathered_maps.push_back(operand_map(input, shape));
    }
    gathered_tile.push_back(gathered ? static_cast<int>(gathered_maps.size()) - 1 : -1);
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

  const size_t num_steps = program.steps.size();
  const std::vector<ChainStep>& chain = program.chain;
  const auto run_chain = chain.empty() ? nullptr : chain_kernel().run;

  const int64_t tiles = (n + kFusedTile - 1) / kFusedTile;
  const int64_t grain = std::max<int64_t>(1, kElementwiseGrain / kFusedTile);
  parallel_for(0, tiles, grain, [&](int64_t first, int64_t last) {
    // The thread's scratch: one tile per step (the outputs' steps write to
    // the outputs instead), kept between runs.
    thread_local std::vector<float> scratch;
    thread_local std::vector<const float*> step_data;
    const auto tile_floats = static_cast<size_t>(kFusedTile);
    scratch.resize((static_cast<size_t>(program.num_slots) + gathered_maps.size()) * tile_floats);
    float* gathered = scratch.data() + static_cast<size_t>(program.num_slots) * tile_floats;
    step_data.resize(num_steps);
    const float* operands[kMaxOperands];
    bool operand_scalar[kMaxOperands];
    thread_local std::vector<ChainStep> chain_steps;  // with this tile's outputs
    thread_local std::vector<const float*> chain_inputs;
    chain_steps.assign(chain.begin(), chain.end());
    chain_inputs.resize(inputs.size());
    for (int64_t tile = first; tile < last; ++tile) {
      const int64_t begin = tile * kFusedTile;
      const int64_t count = std::min(kFusedTile, n - begin);
      for (size_t k = 0; k < inputs.size(); ++k) {
        const int b = gathered_tile[k];
        if (b >= 0) {
          gather_operand(input_data[k], gathered_maps[static_cast<size_t>(b)], begin, count,
                         gathered + static_cast<size_t>(b) * tile_floats);
        }
      }
      if (!chain.empty()) {
        for (size_t k = 0; k < inputs.size(); ++k) {
          const int b = gathered_tile[k];
          chain_inputs[k] = input_scalar[k] ? input_data[k]
                            : b >= 0        ? gathered + static_cast<size_t>(b) * tile_floats
                                            : input_data[k] + begin;
        }
        for (size_t s = 0; s < num_steps; ++s) {
          const int result = result_of_step[s];
          chain_steps[s].out =
              result >= 0 ? result_data[static_cast<size_t>(result)] + begin : nullptr;
        }
        run_chain(chain_steps.data(), num_steps, {chain_inputs.data(), input_scalar.get(), count});
        continue;
      }
      for (size_t s = 0; s < num_steps; ++s) {
        const FusedStep& step = program.steps[s];
        for (size_t i = 0; i < step.operands.size(); ++i) {
          const int operand = step.operands[i];
          if (operand < program.num_inputs) {
            const auto k = static_cast<size_t>(operand);
            const int b = gathered_tile[k];
            operands[i] = input_scalar[k] ? input_data[k]
                          : b >= 0        ? gathered + static_cast<size_t>(b) * tile_floats
                                          : input_data[k] + begin;
            operand_scalar[i] = input_scalar[k];
          } else {
            operands[i] = step_data[static_cast<size_t>(operand - program.num_inputs)];
            operand_scalar[i] = false;
          }
        }
        const int result = result_of_step[s];
        float* out = result >= 0 ? result_data[static_cast<size_t>(result)] + begin
                                 : scratch.data() +
                                       static_cast<size_t>(program.scratch_slot[s]) * tile_floats;
        step.kernel(step.attrs, {operands, operand_scalar, out, count});
        step_data[s] = out;
      }
    }
  });
}

}  // namespace tessera::graph
