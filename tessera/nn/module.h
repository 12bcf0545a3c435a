#pragma once

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "tessera/core/dtype.h"
#include "tessera/core/state_dict.h"
#include "tessera/core/tensor.h"

namespace tessera::nn {

// A trainable tensor: a leaf that requires grad. Like torch.nn.Parameter it
// is an ordinary Tensor afterwards; modules register it by name.
class Parameter : public Tensor {
 public:
  Parameter() = default;
  explicit Parameter(const Tensor& data, bool requires_grad = true);
};

// The base of every layer, as in PyTorch: a module owns named parameters,
// buffers and submodules, in registration order. Subclasses register them in
// their constructor and implement forward(). Modules are held by shared_ptr
// so that a parent and the user can both keep a child:
//
//   struct Net : nn::Module {
//     Net() : Module("Net") {
//       fc1 = register_module("fc1", std::make_shared<nn::Linear>(784, 128));
//       fc2 = register_module("fc2", std::make_shared<nn::Linear>(128, 10));
//     }
//     Tensor forward(const Tensor& x) override { return (*fc2)(relu((*fc1)(x))); }
//     std::shared_ptr<nn::Linear> fc1, fc2;
//   };
class Module {
 public:
  using NamedTensors = std::vector<std::pair<std::string, Tensor>>;
  using NamedModules = std::vector<std::pair<std::string, Module*>>;

  explicit Module(std::string type_name = "Module");
  virtual ~Module() = default;
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  // Single-tensor forward; modules with other signatures (attention) add
  // their own overloads. The default raises an error naming the module.
  virtual Tensor forward(const Tensor& x);
  Tensor operator()(const Tensor& x) { return forward(x); }

  // --- registration (returns the registered object) -------------------------
  Tensor register_parameter(const std::string& name, const Tensor& value,
                            bool requires_grad = true);
  // Persistent buffers (running statistics) are part of state_dict().
  Tensor register_buffer(const std::string& name, const Tensor& value, bool persistent = true);
  template <typename M>
  std::shared_ptr<M> register_module(const std::string& name, std::shared_ptr<M> module) {
    add_module(name, module);
    return module;
  }
  void add_module(const std::string& name, std::shared_ptr<Module> module);

  // --- traversal ------------------------------------------------------------
  std::vector<Tensor> parameters(bool recurse = true) const;
  NamedTensors named_parameters(bool recurse = true) const;
  std::vector<Tensor> buffers(bool recurse = true) const;
  NamedTensors named_buffers(bool recurse = true) const;
  std::vector<std::shared_ptr<Module>> children() const;
  const std::vector<std::pair<std::string, std::shared_ptr<Module>>>& named_children() const {
    return children_;
  }
  // This module (under "") and every descendant, depth first.
  NamedModules named_modules();
  int64_t num_parameters() const;

  // --- modes and state ------------------------------------------------------
  void train(bool on = true);
  void eval() { train(false); }
  // Under a graph trace, reading the mode makes the graph compile again
  // once the mode changes (dropout and batch norm trace differently).
  bool is_training() const;

  // Parameters and persistent buffers, keyed "child.sub.name".
  StateDict state_dict() const;
  // Copies values into the existing tensors (so optimizers keep working).
  // Strict: every key must match, with the same shape and dtype; otherwise
  // the error lists the missing, unexpected or mismatched keys.
  void load_state_dict(const StateDict& state, bool strict = true);

  // Calls fn on every submodule, then on this module (PyTorch's order).
  Module& apply(const std::function<void(Module&)>& fn);
  // Casts floating-point parameters and buffers in place; handles held
  // elsewhere (optimizers, layer members) see the new dtype.
  Module& to(DType dtype);
  // Which layout each parameter or buffer takes in to_global, given its
  // qualified name ("block.0.weight") and the tensor.
  using SbpRule = std::function<NdSbp(const std::string& name, const Tensor& tensor)>;
  // Makes every parameter and buffer global on `placement`, in place (the
  // handles optimizers hold follow): the first rank's values are broadcast,
  // then each tensor is laid out as `rule` says (broadcast everywhere when
  // no rule is given). Already-global tensors are redistributed.
  Module& to_global(const Placement& placement, const SbpRule& rule = {});
  // Drops every parameter's gradient (PyTorch's set_to_none=True).
  void zero_grad();
  // Sets requires_grad on every parameter of this module and its
  // descendants: requires_grad_(false) freezes them, and optimizers that
  // hold them skip them since they get no gradient.
  Module& requires_grad_(bool requires_grad = true);

  const std::string& type_name() const { return type_name_; }
  // One line of constructor arguments for printing, e.g.
  // "in_features=784, out_features=10, bias=true".
  virtual std::string extra_repr() const { return ""; }
  // The module tree printed the way PyTorch prints it.
  std::string repr() const;

 private:
  struct Buffer {
    std::string name;
    Tensor value;
    bool persistent;
  };
  void collect(const std::string& prefix, bool recurse, bool params, bool persistent_only,
               NamedTensors& out) const;
  void collect_state(const std::string& prefix, StateDict& out) const;
  void check_new_name(const std::string& name, const char* what) const;

  std::string type_name_;
  bool training_ = true;
  NamedTensors parameters_;
  std::vector<Buffer> buffers_;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> children_;
};

std::ostream& operator<<(std::ostream& os, const Module& module);

// Makes `tensor` (a parameter or buffer) global on `placement` with layout
// `sbp`, in place, as Module::to_global does each of its tensors: every
// handle to it (a module's, an optimizer's, the caller's) then holds the
// global tensor, and its gradient is dropped. A local tensor's values are
// the first rank's. `what` names it in errors ("[Linear.to_global] 'weight'").
void to_global_in_place(const Tensor& tensor, const Placement& placement, const NdSbp& sbp,
                        const std::string& what);

}  // namespace tessera::nn
