#include "tessera/global/parallel.h"

#include <set>

#include "tessera/core/error.h"
#include "tessera/global/layout.h"

namespace tessera::global {

namespace {

// "blocks.0.mlp.0.weight" -> ("blocks.0.mlp.0", "weight").
std::pair<std::string, std::string> split_name(const std::string& name) {
  const size_t dot = name.rfind('.');
  if (dot == std::string::npos) return {"", name};
  return {name.substr(0, dot), name.substr(dot + 1)};
}

}  // namespace

nn::Module::SbpRule replicate(int ndim) {
  return [ndim](const std::string&, const Tensor&) { return NdSbp::broadcast(ndim); };
}

nn::Module::SbpRule tensor_parallel(std::map<std::string, TpStyle> plan, int ndim, int tp_axis) {
  TESSERA_CHECK(tp_axis >= 0 && tp_axis < ndim, "[tensor_parallel] tp_axis ", tp_axis,
                " is outside a ", ndim, "-D mesh");
  return [plan = std::move(plan), ndim, tp_axis](const std::string& name, const Tensor&) {
    auto [module, leaf] = split_name(name);
    NdSbp broadcast = NdSbp::broadcast(ndim);
    auto it = plan.find(module);
    if (it == plan.end()) return broadcast;
    switch (it->second) {
      case TpStyle::column:  // y = x W^T + b with W [out, in]: split the outputs
        return with_axis(broadcast, tp_axis, Sbp::split(0));
      case TpStyle::row:  // split the inputs; the bias is added once, after the sum
        return leaf == "weight" ? with_axis(broadcast, tp_axis, Sbp::split(1)) : broadcast;
      case TpStyle::vocab:
        return leaf == "weight" ? with_axis(broadcast, tp_axis, Sbp::split(0)) : broadcast;
    }
    return broadcast;
  };
}

NdSbp batch_sbp(int ndim, int dp_axis) {
  TESSERA_CHECK(dp_axis >= 0 && dp_axis < ndim, "[batch_sbp] dp_axis ", dp_axis,
                " is outside a ", ndim, "-D mesh");
  return with_axis(NdSbp::broadcast(ndim), dp_axis, Sbp::split(0));
}

void parallelize(nn::Module& module, const Placement& placement,
                 const std::map<std::string, TpStyle>& plan, int tp_axis) {
  std::set<std::string> modules;
  for (const auto& [name, tensor] : module.named_parameters()) modules.insert(split_name(name).first);
  for (const auto& [name, style] : plan) {
    TESSERA_CHECK(modules.count(name), "[parallelize] the plan names '", name,
                  "' but the model has no module of that name with parameters");
  }
  const int ndim = placement.ndim();
  if (plan.empty()) {
    module.to_global(placement, replicate(ndim));
    return;
  }
  module.to_global(placement, tensor_parallel(plan, ndim, tp_axis < 0 ? ndim - 1 : tp_axis));
}

std::string describe_layout(const nn::Module& module) {
  std::string text;
  for (const auto& [name, tensor] : module.named_parameters()) {
    text += name + " " + shape_str(tensor.shape()) + ": " +
            (tensor.is_global() ? placement_str(tensor.placement()) + " " +
                                      nd_sbp_str(tensor.nd_sbp())
                                : std::string("local")) +
            "\n";
  }
  return text;
}

}  // namespace tessera::global
