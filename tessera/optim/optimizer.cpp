#include "tessera/optim/optimizer.h"

#include <algorithm>
#include <set>

#include "tessera/core/grad_mode.h"
#include "tessera/core/shard_trace.h"

namespace tessera::optim {
namespace {

// Parses "<index>.<rest>" after a prefix; false if malformed.
bool parse_index(const std::string& text, size_t& index, std::string& rest) {
  const size_t dot = text.find('.');
  if (dot == 0 || dot == std::string::npos) return false;
  index = 0;
  for (size_t i = 0; i < dot; ++i) {
    if (text[i] < '0' || text[i] > '9' || index > (1u << 30)) return false;
    index = index * 10 + static_cast<size_t>(text[i] - '0');
  }
  rest = text.substr(dot + 1);
  return !rest.empty();
}

thread_local SkipUpdatesScope* t_skip_updates = nullptr;

}  // namespace

SkipUpdatesScope::SkipUpdatesScope() : previous_(t_skip_updates) {
  t_skip_updates = this;
}

SkipUpdatesScope::~SkipUpdatesScope() {
  t_skip_updates = previous_;
}

bool Optimizer::skip_update(double states_per_parameter) const {
  if (t_skip_updates == nullptr) return false;
  t_skip_updates->states_ = std::max(t_skip_updates->states_, states_per_parameter);
  return true;
}

void Optimizer::zero_grad() {
  for (auto& group : groups_)
    for (const Tensor& param : group) param.impl().grad.reset();
}

const std::vector<Tensor>& Optimizer::param_group(size_t group) const {
  check_group(group);
  return groups_[group];
}

void Optimizer::record_step_for_graph(size_t index) {
  if (!mode_active()) return;
  record_host_effect([this, index] { ++states_[index].step; });
  // A graph trace (graph::trace holds a ShardTraceScope) leaves the count
  // where it was; every run of the graph advances it, so plans compiled at
  // different times share one count. Other mode handlers run the step, as
  // eager does.
  if (tracing_shards()) --states_[index].step;
}

void Optimizer::check_group(size_t group) const {
  TESSERA_CHECK(group < groups_.size(), "[", name_, "] parameter group ", group,
                " does not exist; the optimizer has ", groups_.size(), " group(s)");
}

size_t Optimizer::first_index(size_t group) const {
  size_t index = 0;
  for (size_t g = 0; g < group; ++g) index += groups_[g].size();
  return index;
}

std::string Optimizer::param_name(size_t index) const {
  if (index < names_.size() && !names_[index].empty()) return "'" + names_[index] + "'";
  return std::to_string(index);
}

void Optimizer::add_params(const std::vector<Tensor>& params,
                           const std::vector<std::string>& names) {
  TESSERA_CHECK(!params.empty(), "[", name_, "] got an empty parameter list");
  TESSERA_CHECK(names.empty() || names.size() == params.size(), "[", name_, "] got ",
                names.size(), " names for ", params.size(), " parameters");
  const size_t first = states_.size();
  std::vector<std::string> all_names = names_;
  all_names.resize(first);
  if (names.empty()) {
    all_names.resize(first + params.size());
  } else {
    all_names.insert(all_names.end(), names.begin(), names.end());
  }
  auto describe = [&](size_t i) {
    const std::string& name = all_names[first + i];
    return name.empty() ? std::to_string(first + i) : "'" + name + "'";
  };
  std::set<const TensorImpl*> seen;
  for (const auto& group : groups_)
    for (const Tensor& param : group) seen.insert(&param.impl());
  for (size_t i = 0; i < params.size(); ++i) {
    const Tensor& param = params[i];
    TESSERA_CHECK(param.defined(), "[", name_, "] parameter ", describe(i), " is undefined");
    TESSERA_CHECK(is_floating(param.dtype()) && param.is_leaf(), "[", name_, "] parameter ",
                  describe(i), " must be a floating-point leaf tensor; got ",
                  dtype_name(param.dtype()), param.is_leaf() ? "" : ", not a leaf (use detach())");
    TESSERA_CHECK(param.is_contiguous(), "[", name_, "] parameter ", describe(i), " of shape ",
                  shape_str(param.shape()), " must be contiguous");
    TESSERA_CHECK(seen.insert(&param.impl()).second, "[", name_, "] parameter ", describe(i),
                  " appears more than once");
  }
  groups_.push_back(params);
  states_.resize(states_.size() + params.size());
  names_ = std::move(all_names);
}

Tensor Optimizer::dense_grad(const Tensor& param) const {
  Tensor grad = param.grad();
  if (!grad.defined()) return grad;
  auto describe = [&] {
    size_t index = 0;
    for (const auto& group : groups_) {
      for (const Tensor& candidate : group) {
        if (&candidate.impl() == &param.impl()) return param_name(index);
        ++index;
      }
    }
    return std::string("?");
  };
  TESSERA_CHECK(grad.shape() == param.shape(), "[", name_, "] gradient of shape ",
                shape_str(grad.shape()), " does not match the shape ", shape_str(param.shape()),
                " of parameter ", describe());
  NoGradGuard no_grad;
  if (grad.dtype() != param.dtype()) grad = grad.to(param.dtype());
  if (param.is_global()) {
    // Updates run on this rank's shard; the gradient is laid out like it.
    TESSERA_CHECK(!param.nd_sbp().any_partial(), "[", name_, "] parameter ", describe(),
                  " is laid out as ",
                  nd_sbp_str(param.nd_sbp()), "; optimizers need split or broadcast parameters");
    if (!(grad.placement() == param.placement() && grad.nd_sbp() == param.nd_sbp())) {
      grad = grad.to_global(param.placement(), param.nd_sbp());
    }
  }
  return grad;
}

StateDict Optimizer::state_dict() const {
  StateDict out;
  for (size_t index = 0; index < states_.size(); ++index) {
    const ParamState& state = states_[index];
    if (state.step == 0 && state.buffers.empty()) continue;
    const std::string prefix = "state." + std::to_string(index) + ".";
    for (const auto& [name, buffer] : state.buffers) out.insert(prefix + name, buffer.clone());
    out.insert(prefix + "step", Tensor::scalar(static_cast<double>(state.step), DType::i64));
  }
  for (size_t group = 0; group < groups_.size(); ++group)
    out.insert("param_groups." + std::to_string(group) + ".lr",
               Tensor::scalar(lr(group), DType::f64));
  return out;
}

void Optimizer::load_state_dict(const StateDict& state) {
  std::vector<ParamState> loaded(states_.size());
  std::vector<double> lrs(groups_.size(), -1.0);
  std::vector<const Tensor*> params;
  for (const auto& group : groups_)
    for (const Tensor& param : group) params.push_back(&param);

  for (const auto& [key, value] : state) {
    size_t index = 0;
    std::string field;
    if (key.rfind("state.", 0) == 0 && parse_index(key.substr(6), index, field)) {
      TESSERA_CHECK(index < params.size(), "[", name_, ".load_state_dict] key '", key,
                    "' refers to parameter ", index, " but the optimizer has ", params.size());
      if (field == "step") {
        TESSERA_CHECK(value.numel() == 1, "[", name_, ".load_state_dict] key '", key,
                      "' must hold one value, got shape ", shape_str(value.shape()));
        loaded[index].step = value.item<int64_t>();
        continue;
      }
      const Tensor& param = *params[index];
      TESSERA_CHECK(value.shape() == param.shape(), "[", name_, ".load_state_dict] key '", key,
                    "' has shape ", shape_str(value.shape()), " but parameter ",
                    param_name(index), " has shape ", shape_str(param.shape()));
      NoGradGuard no_grad;
      loaded[index].buffers[field] = value.to(param.dtype()).contiguous().clone();
      continue;
    }
    if (key.rfind("param_groups.", 0) == 0 && parse_index(key.substr(13), index, field) &&
        field == "lr") {
      TESSERA_CHECK(index < groups_.size() && value.numel() == 1, "[", name_,
                    ".load_state_dict] key '", key, "' does not match the optimizer's ",
                    groups_.size(), " parameter group(s)");
      lrs[index] = value.item<double>();
      continue;
    }
    TESSERA_FAIL("[", name_, ".load_state_dict] unexpected key '", key,
                 "'; expected state.<index>.<buffer>, state.<index>.step or "
                 "param_groups.<group>.lr");
  }
  for (size_t group = 0; group < lrs.size(); ++group)
    TESSERA_CHECK(lrs[group] >= 0.0, "[", name_, ".load_state_dict] missing key 'param_groups.",
                  group, ".lr'");
  states_ = std::move(loaded);
  for (size_t group = 0; group < lrs.size(); ++group) set_lr(lrs[group], group);
}

}  // namespace tessera::optim
