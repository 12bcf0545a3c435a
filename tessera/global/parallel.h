#pragma once

// Data, tensor and 2-D parallelism expressed as layouts only (DESIGN §3-4):
// rules that Module::to_global applies to each parameter, and the layout of
// a batch. The model code itself does not change.
//
//   data parallel:    parameters broadcast, batch S(0); the gradient of a
//                     broadcast parameter fed split data arrives partial and
//                     is all-reduced into the parameter's layout.
//   tensor parallel:  Megatron-LM's split of a Linear pair: the first
//                     column-parallel (weight and bias S(0)), the second
//                     row-parallel (weight S(1), bias broadcast);
//                     vocab-parallel Embedding (weight S(0)).
//   2-D:              a [dp, tp] mesh: data split on one axis, the
//                     tensor-parallel split on the other.

#include <map>
#include <string>

#include "tessera/nn/module.h"

namespace tessera::global {

// How tensor parallelism splits one module.
enum class TpStyle { column, row, vocab };

// Every parameter broadcast on a mesh of `ndim` axes.
nn::Module::SbpRule replicate(int ndim = 1);

// Parameters of the modules named in `plan` (qualified names such as
// "blocks.0.mlp.0") split on mesh axis `tp_axis` as their style says;
// everything else broadcast. Modules a plan names must be Linear (column,
// row) or Embedding (vocab); a name that matches no module is an error at
// to_global time.
nn::Module::SbpRule tensor_parallel(std::map<std::string, TpStyle> plan, int ndim = 1,
                                    int tp_axis = 0);

// A batch split along dim 0 on mesh axis `dp_axis`, broadcast elsewhere.
NdSbp batch_sbp(int ndim = 1, int dp_axis = 0);

// Applies `rule` through module.to_global(placement, ...), first checking
// that every module `plan` names exists.
void parallelize(nn::Module& module, const Placement& placement,
                 const std::map<std::string, TpStyle>& plan, int tp_axis = -1);

// "name: placement sbp" per parameter, one per line: what gpt_parallel
// prints to show the layout it chose.
std::string describe_layout(const nn::Module& module);

}  // namespace tessera::global
