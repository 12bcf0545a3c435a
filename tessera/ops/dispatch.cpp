#include "tessera/ops/dispatch.h"

#include "tessera/core/grad_mode.h"
#include "tessera/ops/elementwise.h"

namespace tessera {

namespace {

std::vector<TensorMeta> metas_of(const std::vector<Tensor>& inputs) {
  std::vector<TensorMeta> metas;
  metas.reserve(inputs.size());
  for (const Tensor& input : inputs) metas.push_back(input.meta());
  return metas;
}

// bf16 and f16 are computed in f32 where an op has no kernel of their own,
// as PyTorch's CPU kernels compute them: the 16-bit inputs widened, the op
// run, each output rounded to the dtype the op gives it. The casts are ops,
// so gradients flow through them.
// It is a decomposition (cast, op, cast), made before any handler runs, so
// the tape and a tracer see the f32 op and the casts.
bool computes_widened(const OpDef& op, const std::vector<Tensor>& inputs, const Attrs& attrs) {
  if (inputs.empty() || op.view) return false;
  bool any_narrow = false;
  for (const Tensor& t : inputs)
    any_narrow = any_narrow || t.dtype() == DType::bf16 || t.dtype() == DType::f16;
  if (!any_narrow) return false;
  DType kernel_dtype = op.kernel_dtype_input >= 0
                           ? inputs[static_cast<size_t>(op.kernel_dtype_input)].dtype()
                           : op.infer(metas_of(inputs), attrs).at(0).dtype;
  if (kernel_dtype != DType::bf16 && kernel_dtype != DType::f16) return false;
  const DeviceType device = inputs[0].device().type;
  return !has_kernel(op, device, kernel_dtype) && has_kernel(op, device, DType::f32);
}

std::vector<Tensor> call_widened(const OpDef& op, const std::vector<Tensor>& inputs,
                                 const Attrs& attrs) {
  const std::vector<TensorMeta> output_metas = op.infer(metas_of(inputs), attrs);
  std::vector<Tensor> wide;
  wide.reserve(inputs.size());
  for (const Tensor& t : inputs) {
    const bool narrow = t.dtype() == DType::bf16 || t.dtype() == DType::f16;
    wide.push_back(narrow ? cast(t, DType::f32) : t);
  }
  std::vector<Tensor> outputs = call(op, wide, attrs);
  for (size_t k = 0; k < outputs.size(); ++k) {
    if (outputs[k].dtype() != output_metas[k].dtype) {
      outputs[k] = cast(outputs[k], output_metas[k].dtype);
    }
  }
  return outputs;
}

// Outputs without storage: every inference rule runs, no kernel. A view's
// output is an alias (no storage either), so its strides are the real ones.
class MetaHandler final : public Handler {
 public:
  const char* name() const override { return "meta"; }
  std::vector<Tensor> run(const OpDef& op, const std::vector<Tensor>& inputs,
                          const Attrs& attrs) override {
    std::vector<TensorMeta> output_metas = op.infer(metas_of(inputs), attrs);
    if (op.view) return {op.view(inputs, attrs)};
    std::vector<Tensor> outputs;
    outputs.reserve(output_metas.size());
    for (const TensorMeta& meta : output_metas) {
      outputs.push_back(Tensor::empty(meta.shape, meta.dtype, Device::meta()));
    }
    return outputs;
  }
};

class LocalHandler final : public Handler {
 public:
  const char* name() const override { return "eager-local"; }
  std::vector<Tensor> run(const OpDef& op, const std::vector<Tensor>& inputs,
                          const Attrs& attrs) override {
    std::vector<TensorMeta> output_metas = op.infer(metas_of(inputs), attrs);
    if (op.view) return {op.view(inputs, attrs)};
    Device device = inputs.empty() ? output_metas.at(0).device : inputs[0].device();
    if (device.type == DeviceType::meta) return meta_handler().run(op, inputs, attrs);
    DType kernel_dtype = op.kernel_dtype_input >= 0 && !inputs.empty()
                             ? inputs[static_cast<size_t>(op.kernel_dtype_input)].dtype()
                             : output_metas.at(0).dtype;
    // Before allocating, so a missing kernel costs no device memory.
    KernelFn kernel = find_kernel(op, device.type, kernel_dtype);
    std::vector<Tensor> outputs;
    outputs.reserve(output_metas.size());
    for (const TensorMeta& meta : output_metas) {
      outputs.push_back(Tensor::empty(meta.shape, meta.dtype, meta.device));
    }
    KernelContext context{op, inputs, outputs, attrs};
    GradModeGuard no_grad(false);  // helpers a kernel calls (contiguous()) are not on the tape
    kernel(context);
    return outputs;
  }
};

// A global call with no global layer linked.
class MissingGlobalHandler final : public Handler {
 public:
  const char* name() const override { return "eager-global (missing)"; }
  std::vector<Tensor> run(const OpDef& op, const std::vector<Tensor>&, const Attrs&) override {
    TESSERA_FAIL("[", op.name, "] got global tensors, but the global layer is not linked");
  }
};

struct Handlers {
  Handler* by_key[kNumDispatchKeys] = {};
};

Handlers& handlers() {
  static LocalHandler local;
  static MetaHandler meta;
  static MissingGlobalHandler missing_global;
  static Handlers instance{{&local, &meta, &missing_global}};
  return instance;
}

// The mode handlers of this thread, innermost last.
thread_local std::vector<Handler*> modes;

// Takes the innermost mode off the stack while it runs one call.
class ModeTurn {
 public:
  ModeTurn() : handler_(modes.back()) { modes.pop_back(); }
  ~ModeTurn() { modes.push_back(handler_); }
  Handler& handler() const { return *handler_; }

 private:
  Handler* handler_;
};

// A 0-d CPU tensor (a number an op was given) joins meta tensors, so
// meta runs see the same calls as real ones.
bool same_device(const Tensor& a, const Tensor& b) {
  if (a.device() == b.device()) return true;
  auto number = [](const Tensor& t) { return t.dim() == 0 && t.device().type == DeviceType::cpu; };
  return (a.is_meta() && number(b)) || (b.is_meta() && number(a));
}

TapeRecorder tape_recorder = nullptr;
GlobalCopy global_copier = nullptr;

}  // namespace

Handler& local_handler() {
  return *handlers().by_key[static_cast<int>(DispatchKey::local)];
}
Handler& meta_handler() {
  return *handlers().by_key[static_cast<int>(DispatchKey::meta)];
}

Handler* set_handler(DispatchKey key, Handler* handler) {
  TESSERA_CHECK(handler != nullptr, "[dispatch] set_handler needs a handler");
  Handler*& slot = handlers().by_key[static_cast<int>(key)];
  Handler* previous = slot;
  slot = handler;
  return previous;
}

Handler* handler_for(DispatchKey key) {
  return handlers().by_key[static_cast<int>(key)];
}

HandlerScope::HandlerScope(Handler& handler) {
  modes.push_back(&handler);
}
HandlerScope::~HandlerScope() {
  modes.pop_back();
}

DispatchKey dispatch_key(const std::vector<Tensor>& inputs) {
  DispatchKey key = DispatchKey::local;
  for (const Tensor& input : inputs) {
    if (input.is_global()) return DispatchKey::global;
    if (input.is_meta()) key = DispatchKey::meta;
  }
  return key;
}

std::vector<Tensor> redispatch(const OpDef& op, const std::vector<Tensor>& inputs,
                               const Attrs& attrs) {
  const DispatchKey key = dispatch_key(inputs);
  // On global inputs the tape records the logical op, not its shards.
  GradModeGuard no_grad(key == DispatchKey::global ? false : grad_enabled());
  return handlers().by_key[static_cast<int>(key)]->run(op, inputs, attrs);
}

std::vector<Tensor> call(const OpDef& op, const std::vector<Tensor>& inputs, const Attrs& attrs) {
  bool any_requires_grad = false;
  DispatchKey key = DispatchKey::local;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Tensor& input = inputs[i];
    TESSERA_CHECK(input.defined(), "[", op.name, "] input ", i, " is an undefined tensor");
    any_requires_grad = any_requires_grad || input.requires_grad();
    if (input.is_global()) {
      key = DispatchKey::global;
    } else if (input.is_meta() && key == DispatchKey::local) {
      key = DispatchKey::meta;
    }
    TESSERA_CHECK(same_device(input, inputs[0]), "[", op.name,
                  "] inputs are on different devices: ", device_str(inputs[0].device()), " and ",
                  device_str(input.device()));
  }

  if (key == DispatchKey::local && computes_widened(op, inputs, attrs)) {
    return call_widened(op, inputs, attrs);
  }

  std::vector<Tensor> outputs;
  if (!modes.empty()) {
    ModeTurn turn;
    outputs = turn.handler().run(op, inputs, attrs);
  } else if (key == DispatchKey::global) {
    GradModeGuard no_grad(false);  // the tape records the logical op below
    outputs = handlers().by_key[static_cast<int>(key)]->run(op, inputs, attrs);
  } else {
    outputs = handlers().by_key[static_cast<int>(key)]->run(op, inputs, attrs);
  }

  if (op.view) {
    // The root whose storage this views, so in-place writes can check it.
    const TensorImpl& base = inputs[0].impl();
    outputs[0].impl().view_base = base.view_base ? base.view_base : inputs[0].impl_ptr();
  }
  if (any_requires_grad && op.differentiable && grad_enabled()) {
    record_on_tape(op, inputs, attrs, outputs);
  }
  return outputs;
}

Tensor call1(const OpDef& op, const std::vector<Tensor>& inputs, const Attrs& attrs) {
  return std::move(call(op, inputs, attrs)[0]);
}

void set_tape_recorder(TapeRecorder recorder) {
  tape_recorder = recorder;
}

void record_on_tape(const OpDef& op, const std::vector<Tensor>& inputs, const Attrs& attrs,
                    std::vector<Tensor>& outputs) {
  TESSERA_CHECK(tape_recorder != nullptr, "[", op.name,
                "] needs a gradient, but the autograd layer is not linked");
  tape_recorder(op, inputs, attrs, outputs);
}

void set_global_copy(GlobalCopy copy) {
  global_copier = copy;
}

void global_copy(const Tensor& dst, const Tensor& src) {
  TESSERA_CHECK(global_copier != nullptr,
                "[copy_] got a global destination, but the global layer is not linked");
  global_copier(dst, src);
}

}  // namespace tessera
