#include "tessera/ops/dispatch.h"

#include <algorithm>

#include "tessera/core/grad_mode.h"
#include "tessera/core/memory_span.h"
#include "tessera/core/storage.h"
#include "tessera/core/work_queue.h"
#include "tessera/ops/elementwise.h"
#include "tessera/ops/layout_attrs.h"

namespace tessera {

namespace {

MetaVector metas_of(const TensorVector& inputs) {
  MetaVector metas;
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
bool computes_widened(const OpDef& op, const TensorVector& inputs, const Attrs& attrs) {
  // An in-place op must write its own inputs, not widened copies of them.
  if (inputs.empty() || op.view || !op.writes.empty()) return false;
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

TensorVector call_widened(const OpDef& op, const TensorVector& inputs, const Attrs& attrs) {
  const MetaVector output_metas = op.infer(metas_of(inputs), attrs);
  TensorVector wide;
  wide.reserve(inputs.size());
  for (const Tensor& t : inputs) {
    const bool narrow = t.dtype() == DType::bf16 || t.dtype() == DType::f16;
    wide.push_back(narrow ? cast(t, DType::f32) : t);
  }
  TensorVector outputs = call(op, wide, attrs);
  for (size_t k = 0; k < outputs.size(); ++k) {
    if (outputs[k].dtype() != output_metas[k].dtype) {
      outputs[k] = cast(outputs[k], output_metas[k].dtype);
    }
  }
  return outputs;
}

// An in-place op's outputs: the inputs it writes, after checking that its
// inference gives them their own metas.
TensorVector written_inputs(const OpDef& op, const TensorVector& inputs,
                            const MetaVector& output_metas) {
  TensorVector outputs;
  outputs.reserve(op.writes.size());
  for (size_t o = 0; o < op.writes.size(); ++o) {
    const Tensor& written = inputs.at(static_cast<size_t>(op.writes[o]));
    TESSERA_CHECK(
        output_metas.at(o).shape == written.shape() && output_metas[o].dtype == written.dtype(),
        "[", op.name, "] writes input ", op.writes[o], " in place, but its result would ", "be ",
        shape_str(output_metas[o].shape), " ", dtype_name(output_metas[o].dtype),
        " where the input is ", shape_str(written.shape()), " ", dtype_name(written.dtype()));
    outputs.push_back(written);
  }
  return outputs;
}

// A written input must be the caller's own memory, not a contiguous copy.
void check_written_contiguous(const OpDef& op, const TensorVector& inputs) {
  for (int w : op.writes) {
    const Tensor& written = inputs.at(static_cast<size_t>(w));
    TESSERA_CHECK(written.is_contiguous(), "[", op.name, "] writes input ", w,
                  " in place and needs it contiguous, but it has shape ",
                  shape_str(written.shape()), " and strides ", shape_str(written.strides()));
  }
}

// The inputs as a kernel that asked for contiguous ones gets them.
TensorVector contiguous_all(const TensorVector& inputs, const OpDef& op) {
  check_written_contiguous(op, inputs);
  TensorVector dense = inputs;
  for (Tensor& input : dense) {
    if (!input.is_contiguous()) input = input.contiguous();
  }
  return dense;
}

// Outputs without storage: every inference rule runs, no kernel. A view's
// output is an alias (no storage either), so its strides are the real ones.
class MetaHandler final : public Handler {
 public:
  const char* name() const override { return "meta"; }
  TensorVector run(const OpDef& op, const TensorVector& inputs, const Attrs& attrs) override {
    MetaVector output_metas = op.infer(metas_of(inputs), attrs);
    if (op.view) return {op.view(inputs, attrs)};
    if (op.contiguous_inputs) check_written_contiguous(op, inputs);
    if (!op.writes.empty()) return written_inputs(op, inputs, output_metas);
    TensorVector outputs;
    outputs.reserve(output_metas.size());
    for (const TensorMeta& meta : output_metas) {
      outputs.push_back(Tensor::empty(meta.shape, meta.dtype, Device::meta()));
    }
    return outputs;
  }
};

// Waits for asynchronous work (a collective in flight) still writing the
// tensors' memory, as a CUDA stream waits for an event. Work on a queue's
// own thread runs in queue order, so it never waits.
void wait_for_writers(const TensorVector& tensors) {
  for (const Tensor& t : tensors) {
    Storage* storage = t.impl().storage.get();
    if (storage != nullptr && storage->has_pending() && !WorkQueue::on_any_queue_thread()) {
      storage->wait_pending();
    }
  }
}

class LocalHandler final : public Handler {
 public:
  const char* name() const override { return "eager-local"; }
  TensorVector run(const OpDef& op, const TensorVector& inputs, const Attrs& attrs) override {
    MetaVector output_metas = op.infer(metas_of(inputs), attrs);
    if (op.view) return {op.view(inputs, attrs)};
    Device device = inputs.empty() ? output_metas.at(0).device : inputs[0].device();
    if (device.type == DeviceType::meta) return meta_handler().run(op, inputs, attrs);
    DType kernel_dtype = op.kernel_dtype_input >= 0 && !inputs.empty()
                             ? inputs[static_cast<size_t>(op.kernel_dtype_input)].dtype()
                             : output_metas.at(0).dtype;
    // Before allocating, so a missing kernel costs no device memory.
    KernelFn kernel = find_kernel(op, device.type, kernel_dtype);
    GradModeGuard no_grad(false);  // helpers a kernel calls are not on the tape
    TensorVector outputs;
    if (!op.writes.empty()) {
      outputs = written_inputs(op, inputs, output_metas);
    } else {
      outputs.reserve(output_metas.size());
      for (const TensorMeta& meta : output_metas) {
        outputs.push_back(Tensor::empty(meta.shape, meta.dtype, meta.device));
      }
    }
    wait_for_writers(inputs);
    Workspace workspace(device);
    if (op.contiguous_inputs) {
      const TensorVector dense = contiguous_all(inputs, op);
      KernelContext context{op, dense, outputs, attrs, workspace, Stream{device}};
      kernel(context);
    } else {
      KernelContext context{op, inputs, outputs, attrs, workspace, Stream{device}};
      kernel(context);
    }
    return outputs;
  }
};

// A global call with no global layer linked.
class MissingGlobalHandler final : public Handler {
 public:
  const char* name() const override { return "eager-global (missing)"; }
  TensorVector run(const OpDef& op, const TensorVector&, const Attrs&) override {
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
// A fixed array, not a vector: a trivially built thread_local is one load
// from the thread pointer, where a vector's needs a guard call every time.
constexpr int kMaxModes = 16;
[[gnu::tls_model("initial-exec")]] thread_local Handler* modes[kMaxModes];
[[gnu::tls_model("initial-exec")]] thread_local int mode_count = 0;

// Takes the innermost mode off the stack while it runs one call.
class ModeTurn {
 public:
  ModeTurn() : handler_(modes[--mode_count]) {}
  ~ModeTurn() { modes[mode_count++] = handler_; }
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

// What grad mode allows of an in-place op, as in PyTorch: with grad mode on,
// a leaf that requires grad (or a view of one) cannot be written, and an op
// whose write autograd would have to track records itself (Tensor::copy_),
// so a plain call may not write anything that requires grad.
void check_writable(const OpDef& op, const TensorVector& inputs) {
  if (!grad_enabled()) return;
  for (int w : op.writes) {
    TESSERA_CHECK(w >= 0 && static_cast<size_t>(w) < inputs.size(), "[", op.name, "] writes input ",
                  w, " but was given ", inputs.size(), " inputs");
    const TensorImpl& t = inputs[static_cast<size_t>(w)].impl();
    const TensorImpl* base = t.view_base.get();
    const bool tracked = t.requires_grad || (base && base->requires_grad);
    TESSERA_CHECK(!tracked, "[", op.name, "] writes input ", w, " (", shape_str(t.shape),
                  ") in place, and it ", t.requires_grad && !t.grad_fn ? "is a leaf that " : "",
                  "requires grad while grad mode is on; run it under NoGradGuard (as optimizers ",
                  "do)");
  }
  if (!op.differentiable) return;
  for (size_t i = 0; i < inputs.size(); ++i) {
    TESSERA_CHECK(!inputs[i].requires_grad(), "[", op.name, "] writes in place and input ", i,
                  " requires grad; this op is recorded by autograd only through its Tensor ",
                  "method (e.g. x.copy_(src)), or run it under NoGradGuard");
  }
}

// Whether a view op's output is its input's memory. A reshape that the
// layout cannot view copies (a global one inside its local call), and a
// global view of an input boxed into another layout views the boxed copy:
// such an output is no view. Marking it one would keep the input alive as
// long as the copy (a copy saved for backward would hold both) and apply
// the input's in-place checks to memory that is not the input's. A rank
// without a shard of either has nothing to compare: it keeps the view.
bool views_memory_of(const Tensor& out, const Tensor& in) {
  if (out.is_global() && (!out.local_shard().defined() || !in.local_shard().defined())) {
    return true;
  }
  return out.shares_storage(in);
}

// As in PyTorch, an in-place op may write a tensor that another input is
// exactly (x.add_(x)) but not one that another input partly overlaps: its
// kernels read and write in chunks, so the result would depend on the
// order. Kernels rely on this to treat their inputs as distinct arrays.
// Like PyTorch, only contiguous tensors are compared: interleaved strided
// views can span the same range without sharing an element.
void check_no_partial_overlap(const OpDef& op, const TensorVector& inputs) {
  for (int w : op.writes) {
    const Tensor& written = inputs.at(static_cast<size_t>(w));
    if (!written.is_contiguous()) continue;
    for (size_t i = 0; i < inputs.size(); ++i) {
      const Tensor& other = inputs[i];
      if (i == static_cast<size_t>(w) || !other.defined() || !other.is_contiguous() ||
          !spans_meet(written, other) || same_elements(written, other)) {
        continue;
      }
      const auto [first, last] = element_span(written);
      const auto [other_first, other_last] = element_span(other);
      TESSERA_FAIL("[", op.name, "] writes input ", w, " in place, but input ", i,
                   " partly overlaps its memory (elements ", other_first, "..", other_last,
                   " of the storage against ", first, "..", last, "); pass a clone() of input ", i,
                   " instead");
    }
  }
}

TapeRecorder tape_recorder = nullptr;

// Calls the eager-global handler runs whatever their inputs: conversions
// (OpDef::global_only) and factories asked for a global tensor.
bool always_global(const OpDef& op, const TensorVector& inputs, const Attrs& attrs) {
  return op.global_only || (inputs.empty() && has_layout_attrs(attrs));
}

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
  TESSERA_CHECK(mode_count < kMaxModes, "[dispatch] more than ", kMaxModes,
                " mode handlers are nested on this thread");
  modes[mode_count++] = &handler;
}
HandlerScope::~HandlerScope() {
  --mode_count;
}

bool mode_active() {
  return mode_count > 0;
}

void record_host_effect(std::function<void()> effect) {
  if (mode_count > 0) modes[mode_count - 1]->host_effect(std::move(effect));
}

void record_guard(std::function<std::string()> changed) {
  if (mode_count > 0) modes[mode_count - 1]->guard(std::move(changed));
}

void record_attr_refresh(std::function<void(Attrs&)> refresh) {
  if (mode_count > 0) modes[mode_count - 1]->refresh_attrs(std::move(refresh));
}

DispatchKey dispatch_key(const TensorVector& inputs) {
  DispatchKey key = DispatchKey::local;
  for (const Tensor& input : inputs) {
    if (input.is_global()) return DispatchKey::global;
    if (input.is_meta()) key = DispatchKey::meta;
  }
  return key;
}

TensorVector redispatch(const OpDef& op, const TensorVector& inputs, const Attrs& attrs) {
  const DispatchKey key =
      always_global(op, inputs, attrs) ? DispatchKey::global : dispatch_key(inputs);
  // On global inputs the tape records the logical op, not its shards.
  GradModeGuard no_grad(key == DispatchKey::global ? false : grad_enabled());
  return handlers().by_key[static_cast<int>(key)]->run(op, inputs, attrs);
}

TensorVector call(const OpDef& op, const TensorVector& inputs, const Attrs& attrs) {
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
    // A mode handler sees stand-ins (a tracer's meta tensors beside the
    // real parameters they were computed from) and checks the devices the
    // values stand for itself.
    TESSERA_CHECK(mode_count > 0 || same_device(input, inputs[0]), "[", op.name,
                  "] inputs are on different devices: ", device_str(inputs[0].device()), " and ",
                  device_str(input.device()));
  }

  if (always_global(op, inputs, attrs)) key = DispatchKey::global;
  if (!op.writes.empty()) {
    check_writable(op, inputs);
    check_no_partial_overlap(op, inputs);
  }
  if (key == DispatchKey::local && computes_widened(op, inputs, attrs)) {
    return call_widened(op, inputs, attrs);
  }

  TensorVector outputs;
  if (mode_count > 0) {
    ModeTurn turn;
    outputs = turn.handler().run(op, inputs, attrs);
  } else if (key == DispatchKey::global) {
    GradModeGuard no_grad(false);  // the tape records the logical op below
    outputs = handlers().by_key[static_cast<int>(key)]->run(op, inputs, attrs);
  } else {
    outputs = handlers().by_key[static_cast<int>(key)]->run(op, inputs, attrs);
  }

  if (op.view && views_memory_of(outputs[0], inputs[0])) {
    // The root whose storage this views, so in-place writes can check it.
    const TensorImpl& base = inputs[0].impl();
    outputs[0].impl().view_base = base.view_base ? base.view_base : inputs[0].impl_ptr();
  }
  if (!op.writes.empty()) {
    // Autograd must see that the written tensors changed (Tensor::version).
    // A global tensor's version is its shard's, which the local call bumped.
    if (key != DispatchKey::global) {
      for (const Tensor& written : outputs) written.bump_version();
    }
    return outputs;  // an in-place op that autograd tracks records itself
  }
  if (any_requires_grad && op.differentiable && grad_enabled()) {
    record_on_tape(op, inputs, attrs, outputs);
  }
  return outputs;
}

Tensor call1(const OpDef& op, const TensorVector& inputs, const Attrs& attrs) {
  return std::move(call(op, inputs, attrs)[0]);
}

void set_tape_recorder(TapeRecorder recorder) {
  tape_recorder = recorder;
}

void record_on_tape(const OpDef& op, const TensorVector& inputs, const Attrs& attrs,
                    TensorVector& outputs) {
  TESSERA_CHECK(tape_recorder != nullptr, "[", op.name,
                "] needs a gradient, but the autograd layer is not linked");
  tape_recorder(op, inputs, attrs, outputs);
}

}  // namespace tessera
