#include "tessera/ops/optimizer_steps.h"

#include "tessera/ops/op.h"
#include "tessera/ops/sbp_rules.h"

namespace tessera {

namespace {

// Every input has the written parameter's shape and dtype.
MetaVector infer_update(const char* op, const MetaVector& in, const std::vector<int>& writes) {
  for (size_t i = 1; i < in.size(); ++i) {
    TESSERA_CHECK(in[i].shape == in[0].shape && in[i].dtype == in[0].dtype, "[", op, "] input ", i,
                  " is ", shape_str(in[i].shape), " ", dtype_name(in[i].dtype),
                  "; every input must match the parameter, ", shape_str(in[0].shape), " ",
                  dtype_name(in[0].dtype));
  }
  MetaVector out;
  for (int w : writes) out.push_back(in[static_cast<size_t>(w)]);
  return out;
}

OpDef update_def(const char* name, std::vector<int> writes, const char* torch_name,
                 const char* signature) {
  OpDef d;
  d.name = name;
  d.kind = OpKind::elementwise;
  d.writes = writes;
  d.differentiable = false;
  d.contiguous_inputs = true;
  d.infer = [name, writes](const MetaVector& in, const Attrs&) {
    return infer_update(name, in, writes);
  };
  d.sbp = [writes](const MetaVector& in, const Attrs&) {
    return broadcast_split_signatures(in, in.at(0).shape, writes.size());
  };
  d.torch_name = torch_name;
  d.signature = signature;
  return d;
}

// Function-local statics, so optimizers may step during another file's
// static initialisation; registered at load time for the op reference.
// inputs {param, grad}; writes param.
const OpDef& sgd_op() {
  static const OpDef& def = register_op(update_def("sgd_step", {0}, "torch.optim.SGD (one update)",
                                                   "sgd_step_(param, grad, {}, step)"));
  return def;
}
// inputs {param, grad, momentum_buffer}; writes param and the buffer.
const OpDef& sgd_momentum_op() {
  static const OpDef& def =
      register_op(update_def("sgd_momentum_step", {0, 2}, "torch.optim.SGD (one update)",
                             "sgd_step_(param, grad, momentum_buffer, step)"));
  return def;
}
// inputs {param, grad, exp_avg, exp_avg_sq}; writes param and the moments.
const OpDef& adam_op() {
  static const OpDef& def = register_op([] {
    OpDef d = update_def("adam_step", {0, 2, 3}, "torch.optim.Adam, torch.optim.AdamW (one update)",
                         "adam_step_(param, grad, exp_avg, exp_avg_sq, step)");
    d.counter_attr = "step";  // the bias correction's update count
    return d;
  }());
  return def;
}
const bool registered = (sgd_op(), sgd_momentum_op(), adam_op(), true);

}  // namespace

void sgd_step_(const Tensor& param, const Tensor& grad, const Tensor& momentum_buffer,
               const SgdStep& step) {
  Attrs attrs{{"lr", step.lr},
              {"momentum", step.momentum},
              {"dampening", step.dampening},
              {"weight_decay", step.weight_decay},
              {"nesterov", step.nesterov},
              {"first_step", step.first_step}};
  if (momentum_buffer.defined()) {
    call(sgd_momentum_op(), {param, grad, momentum_buffer}, attrs);
  } else {
    TESSERA_CHECK(step.momentum == 0.0, "[sgd_step] momentum ", step.momentum,
                  " needs a momentum buffer");
    call(sgd_op(), {param, grad}, attrs);
  }
}

void adam_step_(const Tensor& param, const Tensor& grad, const Tensor& exp_avg,
                const Tensor& exp_avg_sq, const AdamStep& step) {
  TESSERA_CHECK(step.step >= 1, "[adam_step] step counts updates from 1, got ", step.step);
  call(adam_op(), {param, grad, exp_avg, exp_avg_sq},
       {{"lr", step.lr},
        {"beta1", step.beta1},
        {"beta2", step.beta2},
        {"eps", step.eps},
        {"weight_decay", step.weight_decay},
        {"decoupled", step.decoupled_weight_decay},
        {"step", step.step}});
}

}  // namespace tessera
