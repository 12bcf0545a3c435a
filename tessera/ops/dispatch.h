#pragma once

// The dispatcher (DESIGN §3): the one way into every op. `call(op, inputs,
// attrs)` (declared in ops/op.h) checks the inputs, hands the call to a
// handler, and records the logical op on the autograd tape when a gradient
// is needed:
//
//   call(op, inputs, attrs)
//     a mode handler is active (tracing, counting)?  -> it runs the call
//     otherwise, by the inputs' kind (DispatchKey):
//       global inputs, a conversion (OpDef::global_only) or a factory with
//       a layout (ops/layout_attrs.h)
//                      -> eager-global (tessera/global/dispatch.cpp)
//       meta inputs    -> meta: inference only, outputs without storage
//       local inputs   -> eager-local: infer, allocate, run the kernel
//     grad needed?     -> the tape recorder (tessera/autograd) records it
//
// Handlers of higher layers (global, autograd, graph) register themselves
// here, so the ops layer never names them.

#include <functional>
#include <string>
#include <vector>

#include "tessera/ops/op.h"

namespace tessera {

// What kind of tensors a call sees, in order of precedence: one global
// input makes the call global, else one meta input makes it meta.
enum class DispatchKey : uint8_t { local, meta, global };
constexpr int kNumDispatchKeys = 3;

// Runs op calls of one kind. Inputs arrive checked (defined, one device);
// the handler returns the outputs and does not touch autograd.
class Handler {
 public:
  virtual ~Handler() = default;
  virtual const char* name() const = 0;
  virtual TensorVector run(const OpDef& op, const TensorVector& inputs, const Attrs& attrs) = 0;
  // Host-side state a traced graph depends on (tessera/graph): an effect the
  // graph repeats on every run, and a guard that says in words what changed
  // once the graph no longer matches the host ("" while it does). Handlers
  // that do not trace ignore both.
  virtual void host_effect(std::function<void()> /*effect*/) {}
  virtual void guard(std::function<std::string()> /*changed*/) {}
  // An attr of the call it just ran that the host may change between runs
  // (an optimizer's learning rate under a scheduler): the graph rewrites it
  // with `refresh` before each run instead of baking in the traced value.
  virtual void refresh_attrs(std::function<void(Attrs&)> /*refresh*/) {}
};

// The eager-local handler, and the meta one, which runs every inference and
// SBP rule but no kernel. Meta calls that reach the local handler (a
// factory asked for a meta device) are passed to the meta handler.
Handler& local_handler();
Handler& meta_handler();

// Installs the handler for `key` (the global layer installs the eager-global
// one); returns the previous one. Not for use while ops run on other threads.
Handler* set_handler(DispatchKey key, Handler* handler);
Handler* handler_for(DispatchKey key);

// Pushes a mode handler for this thread for the scope's lifetime: every
// call on the thread goes to it first. While it runs one call it is off the
// stack, so the ops it calls itself (e.g. `redispatch`) reach the handler
// below it.
class HandlerScope {
 public:
  explicit HandlerScope(Handler& handler);
  ~HandlerScope();
  HandlerScope(const HandlerScope&) = delete;
  HandlerScope& operator=(const HandlerScope&) = delete;
};

// Whether a mode handler is on this thread's stack.
bool mode_active();

// For code that keeps state outside ops (an optimizer's step counts and
// options): hands the effect or guard to the innermost mode handler. A
// traced graph applies the effect at the end of every run and checks the
// guard before it, so under a graph trace the caller must leave the state
// as it was (Optimizer::record_step_for_graph undoes its own change); other
// handlers may ignore the effect. Without a mode handler both do nothing.
void record_host_effect(std::function<void()> effect);
void record_guard(std::function<std::string()> changed);
// For an attr of the op call just made that the host may change between
// runs (Handler::refresh_attrs). Does nothing without a mode handler.
void record_attr_refresh(std::function<void(Attrs&)> refresh);

// The handler a call with these inputs would reach below the modes (an op
// with OpDef::global_only, or a factory given a layout, reaches the
// eager-global one whatever its inputs).
DispatchKey dispatch_key(const TensorVector& inputs);
// Runs the call on the handler for its inputs' key, skipping the modes and
// the tape (for a mode handler that wants the ordinary result).
TensorVector redispatch(const OpDef& op, const TensorVector& inputs, const Attrs& attrs);

// The autograd tape (installed by tessera/autograd): records `op` with its
// inputs and outputs so backward can run its gradient.
using TapeRecorder = void (*)(const OpDef& op, const TensorVector& inputs, const Attrs& attrs,
                              TensorVector& outputs);
void set_tape_recorder(TapeRecorder recorder);
// Records on the tape; for the few operations that record themselves (an
// in-place copy_ records its written base and views). Raises when no
// autograd layer is linked.
void record_on_tape(const OpDef& op, const TensorVector& inputs, const Attrs& attrs,
                    TensorVector& outputs);

}  // namespace tessera
