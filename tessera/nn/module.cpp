#include "tessera/nn/module.h"

#include <ostream>
#include <sstream>

#include "tessera/core/grad_mode.h"
#include "tessera/ops/dispatch.h"

namespace tessera::nn {

Parameter::Parameter(const Tensor& data, bool requires_grad) : Tensor(data.detach()) {
  set_requires_grad(requires_grad);
}

Module::Module(std::string type_name) : type_name_(std::move(type_name)) {}

Tensor Module::forward(const Tensor&) {
  TESSERA_FAIL("[", type_name_, "] this module has no single-tensor forward(); call its own "
               "forward overload");
}

void Module::check_new_name(const std::string& name, const char* what) const {
  TESSERA_CHECK(!name.empty() && name.find('.') == std::string::npos, "[", type_name_,
                "] invalid ", what, " name '", name, "': it must be non-empty without '.'");
  auto taken = [&](const auto& list, auto key) {
    for (const auto& item : list) {
      if (key(item) == name) return true;
    }
    return false;
  };
  bool used = taken(parameters_, [](const auto& p) { return p.first; }) ||
              taken(buffers_, [](const Buffer& b) { return b.name; }) ||
              taken(children_, [](const auto& c) { return c.first; });
  TESSERA_CHECK(!used, "[", type_name_, "] the name '", name, "' is already registered");
}

Tensor Module::register_parameter(const std::string& name, const Tensor& value,
                                  bool requires_grad) {
  check_new_name(name, "parameter");
  Tensor param = value;
  if (param.defined()) {
    TESSERA_CHECK(is_floating(param.dtype()), "[", type_name_, "] parameter '", name,
                  "' must be floating point, got ", dtype_name(param.dtype()));
    if (!param.is_leaf()) param = param.detach();
    param.set_requires_grad(requires_grad);
  }
  parameters_.emplace_back(name, param);
  return param;
}

Tensor Module::register_buffer(const std::string& name, const Tensor& value, bool persistent) {
  check_new_name(name, "buffer");
  buffers_.push_back({name, value, persistent});
  return value;
}

void Module::add_module(const std::string& name, std::shared_ptr<Module> module) {
  check_new_name(name, "submodule");
  TESSERA_CHECK(module != nullptr, "[", type_name_, "] submodule '", name, "' is null");
  children_.emplace_back(name, std::move(module));
}

void Module::collect(const std::string& prefix, bool recurse, bool params, bool persistent_only,
                     NamedTensors& out) const {
  if (params) {
    for (const auto& [name, value] : parameters_) {
      if (value.defined()) out.emplace_back(prefix + name, value);
    }
  } else {
    for (const Buffer& buffer : buffers_) {
      if (buffer.value.defined() && (buffer.persistent || !persistent_only)) {
        out.emplace_back(prefix + buffer.name, buffer.value);
      }
    }
  }
  if (!recurse) return;
  for (const auto& [name, child] : children_) {
    child->collect(prefix + name + ".", true, params, persistent_only, out);
  }
}

Module::NamedTensors Module::named_parameters(bool recurse) const {
  NamedTensors out;
  collect("", recurse, true, false, out);
  return out;
}

std::vector<Tensor> Module::parameters(bool recurse) const {
  std::vector<Tensor> out;
  for (auto& [name, value] : named_parameters(recurse)) out.push_back(value);
  return out;
}

Module::NamedTensors Module::named_buffers(bool recurse) const {
  NamedTensors out;
  collect("", recurse, false, false, out);
  return out;
}

std::vector<Tensor> Module::buffers(bool recurse) const {
  std::vector<Tensor> out;
  for (auto& [name, value] : named_buffers(recurse)) out.push_back(value);
  return out;
}

std::vector<std::shared_ptr<Module>> Module::children() const {
  std::vector<std::shared_ptr<Module>> out;
  for (const auto& [name, child] : children_) out.push_back(child);
  return out;
}

Module::NamedModules Module::named_modules() {
  NamedModules out{{"", this}};
  for (const auto& [name, child] : children_) {
    for (const auto& [sub_name, module] : child->named_modules()) {
      out.emplace_back(sub_name.empty() ? name : name + "." + sub_name, module);
    }
  }
  return out;
}

int64_t Module::num_parameters() const {
  int64_t total = 0;
  for (const Tensor& p : parameters()) total += p.numel();
  return total;
}

bool Module::is_training() const {
  if (mode_active()) {
    record_guard([this, traced = training_]() -> std::string {
      if (training_ == traced) return "";
      return type_name_ + (training_ ? " switched to training mode" : " switched to eval mode");
    });
  }
  return training_;
}

void Module::train(bool on) {
  training_ = on;
  for (const auto& [name, child] : children_) child->train(on);
}

StateDict Module::state_dict() const {
  StateDict out;
  collect_state("", out);
  return out;
}

// PyTorch's order: each module's parameters, then its persistent buffers,
// then its children's entries.
void Module::collect_state(const std::string& prefix, StateDict& out) const {
  NamedTensors own;
  collect(prefix, false, true, false, own);
  collect(prefix, false, false, true, own);
  for (const auto& [name, value] : own) out.insert(name, value);
  for (const auto& [name, child] : children_) child->collect_state(prefix + name + ".", out);
}

void Module::load_state_dict(const StateDict& state, bool strict) {
  StateDict own = state_dict();
  std::vector<std::string> missing, unexpected, mismatched;
  for (const auto& [key, target] : own) {
    if (!state.contains(key)) {
      missing.push_back(key);
      continue;
    }
    const Tensor& source = state.at(key);
    if (source.shape() != target.shape() || source.dtype() != target.dtype()) {
      mismatched.push_back(key + ": expected " + shape_str(target.shape()) + " " +
                           dtype_name(target.dtype()) + ", got " + shape_str(source.shape()) +
                           " " + dtype_name(source.dtype()));
    }
  }
  for (const auto& [key, value] : state) {
    if (!own.contains(key)) unexpected.push_back(key);
  }
  auto join = [](const std::vector<std::string>& items) {
    std::string out;
    for (const auto& item : items) out += (out.empty() ? "" : ", ") + item;
    return out;
  };
  TESSERA_CHECK(mismatched.empty(), "[", type_name_, ".load_state_dict] mismatched entries: ",
                join(mismatched));
  if (strict) {
    TESSERA_CHECK(missing.empty() && unexpected.empty(), "[", type_name_,
                  ".load_state_dict] missing keys: [", join(missing), "]; unexpected keys: [",
                  join(unexpected), "]");
  }
  NoGradGuard no_grad;
  for (const auto& [key, target] : own) {
    if (state.contains(key)) Tensor(target).copy_(state.at(key));
  }
}

Module& Module::apply(const std::function<void(Module&)>& fn) {
  for (const auto& [name, child] : children_) child->apply(fn);
  fn(*this);
  return *this;
}

Module& Module::to(DType dtype) {
  TESSERA_CHECK(is_floating(dtype), "[", type_name_, ".to] target dtype must be floating point, got ",
                dtype_name(dtype));
  NoGradGuard no_grad;
  auto convert = [dtype](const Tensor& t) {
    if (!t.defined() || !is_floating(t.dtype()) || t.dtype() == dtype) return;
    Tensor converted = t.to(dtype).contiguous();
    TensorImpl& impl = t.impl();
    const TensorImpl& source = converted.impl();
    impl.storage = source.storage;
    impl.offset = source.offset;
    impl.strides = source.strides;
    impl.dtype = dtype;
    impl.grad.reset();
  };
  for (const Tensor& p : parameters()) convert(p);
  for (const Tensor& b : buffers()) convert(b);
  return *this;
}

Module& Module::to_global(const Placement& placement, const SbpRule& rule) {
  std::vector<Sbp> broadcast(static_cast<size_t>(placement.ndim()), Sbp::broadcast());
  auto convert = [&](const std::string& name, const Tensor& t) {
    if (!t.defined()) return;
    to_global_in_place(t, placement, rule ? rule(name, t) : NdSbp(broadcast),
                       "[" + type_name_ + ".to_global] '" + name + "'");
  };
  for (const auto& [name, p] : named_parameters()) convert(name, p);
  for (const auto& [name, b] : named_buffers()) convert(name, b);
  return *this;
}

void to_global_in_place(const Tensor& tensor, const Placement& placement, const NdSbp& sbp,
                        const std::string& what) {
  NoGradGuard no_grad;
  TESSERA_CHECK(!sbp.any_partial(), what, " cannot be laid out as ", nd_sbp_str(sbp),
                "; parameters and buffers are split or broadcast");
  const NdSbp broadcast(std::vector<Sbp>(static_cast<size_t>(placement.ndim()), Sbp::broadcast()));
  // Local values: the first rank's, so every rank starts from the same model.
  Tensor global =
      tensor.is_global() ? tensor.detach() : tensor.detach().to_global(placement, broadcast);
  global = global.to_global(placement, sbp);
  TensorImpl& impl = tensor.impl();
  impl.storage.reset();
  impl.offset = 0;
  impl.strides = global.impl().strides;
  impl.device = global.device();
  impl.global = global.impl().global;
  impl.grad.reset();
}

Module& Module::requires_grad_(bool requires_grad) {
  for (Tensor param : parameters()) param.set_requires_grad(requires_grad);
  return *this;
}

void Module::zero_grad() {
  for (const Tensor& p : parameters()) p.impl().grad.reset();
}

namespace {

void print_module(std::ostream& os, const Module& module, int indent) {
  os << module.type_name() << "(" << module.extra_repr();
  if (module.named_children().empty()) {
    os << ")";
    return;
  }
  if (!module.extra_repr().empty()) os << ",";
  os << "\n";
  for (const auto& [name, child] : module.named_children()) {
    os << std::string(indent + 2, ' ') << "(" << name << "): ";
    print_module(os, *child, indent + 2);
    os << "\n";
  }
  os << std::string(indent, ' ') << ")";
}

}  // namespace

std::string Module::repr() const {
  std::ostringstream os;
  print_module(os, *this, 0);
  return os.str();
}

std::ostream& operator<<(std::ostream& os, const Module& module) { return os << module.repr(); }

}  // namespace tessera::nn
