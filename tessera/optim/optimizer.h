#pragma once

#include <concepts>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "tessera/core/state_dict.h"
#include "tessera/core/tensor.h"
#include "tessera/ops/dispatch.h"

namespace tessera::optim {

// What an optimizer keeps per parameter: named tensors shaped like the
// parameter (momentum_buffer, exp_avg, ...) and the number of steps taken.
struct ParamState {
  std::map<std::string, Tensor> buffers;
  int64_t step = 0;
};

// Parameters with their qualified names, as Module::named_parameters()
// returns them; optimizers built from them name parameters in their errors.
using NamedParameters = std::vector<std::pair<std::string, Tensor>>;

// Matches NamedParameters only, so that an optimizer's constructor overload
// for names stays out of the way of a braced list (`SGD({})`, `SGD({w, b})`).
template <typename T>
concept NamedParameterList = std::same_as<T, NamedParameters>;

// The base of every optimizer, as torch.optim.Optimizer: parameter groups,
// per-parameter state, zero_grad and a state_dict that checkpoints can save.
// Updates are in place on the parameters' storage, outside autograd, so
// modules, views and the user's handles all see the new values.
class Optimizer {
 public:
  virtual ~Optimizer() = default;
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  // One update of every parameter that has a gradient.
  virtual void step() = 0;
  // Drops every parameter's gradient (PyTorch's set_to_none=True).
  void zero_grad();

  size_t num_param_groups() const { return groups_.size(); }
  const std::vector<Tensor>& param_group(size_t group) const;
  // How errors name the parameter at `index` (across groups): its qualified
  // name in quotes when the optimizer was given names, else its index.
  std::string param_name(size_t index) const;
  // The learning rate of a group; set_lr without a group sets every group.
  virtual double lr(size_t group = 0) const = 0;
  virtual void set_lr(double lr, std::optional<size_t> group = std::nullopt) = 0;
  const std::string& name() const { return name_; }

  // Per-parameter state under "state.<index>.<buffer>" and "state.<index>.step"
  // (index counts parameters across groups in order) and each group's
  // learning rate under "param_groups.<group>.lr".
  StateDict state_dict() const;
  // Restores a state_dict from an optimizer over parameters of the same
  // shapes; unknown, malformed or mismatched keys raise an error naming them.
  void load_state_dict(const StateDict& state);

 protected:
  explicit Optimizer(std::string name) : name_(std::move(name)) {}
  // Validates and appends a group: floating-point leaf tensors, none already
  // in another group. Frozen parameters (requires_grad=false) are accepted,
  // as in PyTorch: they get no gradient, so step() skips them until they
  // are unfrozen. `names` is empty or holds one name per parameter.
  void add_params(const std::vector<Tensor>& params, const std::vector<std::string>& names = {});
  // State of the parameter at `index` (across groups).
  ParamState& state(size_t index) { return states_[index]; }
  // Index of the first parameter of `group`.
  size_t first_index(size_t group) const;
  // The parameter's gradient in the parameter's dtype (for a global
  // parameter, in its layout too), or undefined when it has none.
  Tensor dense_grad(const Tensor& param) const;
  void check_group(size_t group) const;
  // Whether step() must return at once (a SkipUpdatesScope is alive); it
  // reports `states_per_parameter`, the parameter-sized state tensors this
  // optimizer keeps per parameter, to the scope.
  bool skip_update(double states_per_parameter) const;
  // Under a graph trace (tessera/graph): every run of the graph advances
  // the parameter's step count, as an eager step() does. Does nothing
  // outside a trace.
  void record_step_for_graph(size_t index);

 private:
  std::string name_;
  std::vector<std::vector<Tensor>> groups_;
  std::vector<ParamState> states_;
  std::vector<std::string> names_;  // one per parameter; empty when unnamed
};

// While one is alive on a thread, every optimizer's step() leaves the
// parameters and its state untouched and only reports the state it keeps.
// The planner traces a training step this way before anything has run, to
// choose the parameters' layouts (graph::compile's auto_parallel): state
// made lazily during that trace would be placeholders. The planner prices
// the update itself, from the state per parameter reported here. An
// optimizer of your own calls skip_update() first in its step().
class SkipUpdatesScope {
 public:
  SkipUpdatesScope();
  ~SkipUpdatesScope();
  SkipUpdatesScope(const SkipUpdatesScope&) = delete;
  SkipUpdatesScope& operator=(const SkipUpdatesScope&) = delete;
  // The most state tensors per parameter (as parameter-sized tensors) an
  // optimizer skipped in this scope keeps: SGD 0 or 1 (momentum), Adam 2
  // (3 with amsgrad); -1 when no optimizer stepped.
  double states_per_parameter() const { return states_; }

 private:
  friend class Optimizer;
  SkipUpdatesScope* previous_;
  double states_ = -1;
};

// Optimizers whose groups carry an Options struct with an `lr` field.
template <typename Options>
class OptimizerWithOptions : public Optimizer {
 public:
  // Adds parameters with their own options (PyTorch's add_param_group):
  // step() updates them with these options, lr(group) and set_lr address
  // the group, and state_dict() saves it. The parameters must not already be
  // in a group. Typical use: a smaller learning rate for a pretrained part,
  //   SGD sgd(head->parameters(), {.lr = 0.1});
  //   sgd.add_param_group(backbone->parameters(), {.lr = 0.01});
  void add_param_group(const std::vector<Tensor>& params, const Options& options) {
    validate(options);
    add_params(params);
    options_.push_back(options);
  }
  // The same with model->named_parameters(), so errors name each parameter.
  template <NamedParameterList Named>
  void add_param_group(const Named& named, const Options& options) {
    std::vector<Tensor> params;
    std::vector<std::string> names;
    for (const auto& [name, param] : named) {
      names.push_back(name);
      params.push_back(param);
    }
    validate(options);
    add_params(params, names);
    options_.push_back(options);
  }
  const Options& options(size_t group = 0) const {
    check_group(group);
    return options_[group];
  }
  double lr(size_t group = 0) const override { return options(group).lr; }
  void set_lr(double lr, std::optional<size_t> group = std::nullopt) override {
    if (group) {
      check_group(*group);
      options_[*group].lr = lr;
      return;
    }
    for (Options& options : options_) options.lr = lr;
  }

 protected:
  using Optimizer::Optimizer;
  virtual void validate(const Options& options) const = 0;
  // Under a graph trace: the update op just called reads the group's
  // learning rate afresh on every run (a scheduler changes it between
  // steps). Does nothing outside a trace.
  void record_lr_for_graph(size_t group) {
    if (!mode_active()) return;
    record_attr_refresh([this, group](Attrs& attrs) { attrs.set("lr", options_[group].lr); });
  }
  // Under a graph trace, once per group: the graph bakes in the options
  // other than lr, so it compiles again once one of them changes, saying
  // which group. Does nothing outside a trace.
  void record_options_for_graph(size_t group) {
    if (!mode_active()) return;
    record_guard([this, group, traced = options_[group]]() -> std::string {
      Options now = options_[group];
      now.lr = traced.lr;
      if (now == traced) return "";
      return name() + " parameter group " + std::to_string(group) +
             " options other than lr changed";
    });
  }
  std::vector<Options> options_;
};

}  // namespace tessera::optim
