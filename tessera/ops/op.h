#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "tessera/core/sbp.h"
#include "tessera/core/storage.h"
#include "tessera/core/tensor.h"
#include "tessera/ops/attrs.h"
#include "tessera/ops/grad_context.h"

namespace tessera {

struct KernelContext;

using InferFn = std::function<MetaVector(const MetaVector&, const Attrs&)>;
using SbpFn = std::function<std::vector<SbpSignature>(const MetaVector&, const Attrs&)>;
using GradFn = std::function<std::vector<Tensor>(const GradContext&)>;
// For view ops: builds the output alias of inputs[0] from the inferred meta.
using ViewFn = std::function<Tensor(const TensorVector&, const Attrs&)>;
// Rewrites logical attributes for a run on one shard (e.g. reshape's target
// shape, or where a random op's shard starts). Given the inputs' local and
// logical metas and, per input, the logical index where its shard starts.
// Identity when absent.
using ShardOffsets = std::vector<std::vector<int64_t>>;
using LocalizeFn = std::function<Attrs(const Attrs&, const MetaVector& local,
                                       const MetaVector& logical, const ShardOffsets& offsets)>;
using KernelFn = void (*)(KernelContext&);

// What an op is, for code that treats families alike: common-subexpression
// elimination, fusion, plan caches, the cost model's defaults.
enum class OpKind : uint8_t {
  other,
  elementwise,    // one output element from the same element of each (broadcast) input
  reduction,      // sums, means, norms, arg-reductions over dims
  view,           // aliases its input's storage
  matmul,         // matmul, bmm, linear
  convolution,    // conv and conv-transpose
  normalization,  // softmax, layer/batch/group norm and their gradients
  indexing,       // gather, scatter, index, embedding, concat, pad
  random,         // draws from a generator
  collective,     // moves data between processes (global/collective_ops.h)
};
const char* op_kind_name(OpKind kind);

// The work of one local op call, for the cost model: floating-point
// operations and bytes read and written.
struct OpCost {
  double flops = 0;
  double bytes = 0;
};
using CostFn =
    std::function<OpCost(const MetaVector& inputs, const MetaVector& outputs, const Attrs& attrs)>;

// The unit of extension: everything device-free about one op. Defined once
// in tessera/ops/<family>.cpp; kernels register against `name`.
struct OpDef {
  std::string name;
  OpKind kind = OpKind::other;  // a view op (view set) is OpKind::view
  InferFn infer;
  // Signatures besides all-broadcast, which is always valid and appended.
  SbpFn sbp;
  // Null for ops whose outputs never carry gradients (comparisons, argmax,
  // random integers). Differentiable ops must set it.
  GradFn grad;
  bool differentiable = true;
  ViewFn view;
  LocalizeFn localize;
  // Which input's dtype selects the kernel (-1: the first output's).
  int kernel_dtype_input = 0;
  // What the gradient reads: saving only that keeps activations' memory low.
  // An op with saves_inputs = false sees only input metas in its gradient;
  // one that reads its outputs must also save its inputs, because under
  // create_graph the outputs are recomputed from them.
  bool saves_inputs = true;
  bool saves_outputs = false;
  // The op's work; when null, op_cost estimates it from the kind.
  CostFn cost;
  // In-place ops: the inputs the op writes, one per output, in order. Each
  // output is that input itself (no allocation); infer must give its meta.
  // Empty for ops that return new tensors.
  std::vector<int> writes;
  // An integer attr that counts the op's calls (Adam's step, which its bias
  // correction reads). A graph must not bake it in: a trace fails unless
  // the caller refreshes it for every run (record_attr_refresh).
  std::string counter_attr;
  // The dispatcher hands the kernel contiguous inputs (copying strided ones
  // first, outside the kernel), so the kernel allocates nothing hidden.
  bool contiguous_inputs = false;
  // Conversions between local and global tensors (to_global, to_local): the
  // eager-global handler runs every call, whatever the inputs are.
  bool global_only = false;

  // For the op reference (docs/ops.md, generated from this registry): the
  // PyTorch function(s) the op implements, e.g. "torch.cumsum", and the
  // public C++ signature(s) that reach it, e.g. "cumsum(x, dim, dtype)".
  std::string torch_name;
  std::string signature;

  // Filled on first dispatch: the kernel table entry per device type.
  // Shared so OpDef stays movable; atomic because any thread may dispatch.
  struct KernelSlots {
    std::atomic<const void*> entry[kNumDeviceTypes] = {};
  };
  std::shared_ptr<KernelSlots> kernel_cache = std::make_shared<KernelSlots>();
};

// Scratch memory for one kernel call: kernels take their temporaries from
// here instead of allocating hidden tensors, so whoever runs the kernel
// owns every byte it uses. Eager dispatch serves it from the device's
// caching allocator and frees it all when the call returns; a graph
// executor can see the bytes a call used (peak_bytes) and plan for them.
class Workspace {
 public:
  explicit Workspace(Device device) : device_(device) {}
  Workspace(const Workspace&) = delete;
  Workspace& operator=(const Workspace&) = delete;

  // At least `bytes` bytes on the workspace's device, 64-byte aligned,
  // valid until the workspace ends; each call gives a new buffer.
  void* allocate(size_t bytes);
  template <typename T>
  T* allocate_as(int64_t count) {
    return static_cast<T*>(allocate(static_cast<size_t>(count) * sizeof(T)));
  }
  // The bytes handed out so far.
  size_t peak_bytes() const { return bytes_; }
  Device device() const { return device_; }

 private:
  Device device_;
  size_t bytes_ = 0;
  std::vector<std::unique_ptr<Storage>> blocks_;
};

// The stream a kernel's work is ordered on; `native` null is the device's
// default stream, the only one eager dispatch uses today. CPU kernels run
// synchronously on the calling thread and the thread pool.
struct Stream {
  Device device{};
  void* native = nullptr;
};

struct KernelContext {
  const OpDef& op;
  const TensorVector& inputs;
  TensorVector& outputs;
  const Attrs& attrs;
  Workspace& workspace;
  Stream stream{};
};

// The op-reference fields of ops that a shared helper builds (unary_def,
// binary_def, ...): the helper looks its op up in a table kept beside it.
struct OpDoc {
  const char* name;
  const char* torch_name;
  const char* signature;
};
// Sets def.torch_name and def.signature from the entry for def.name, if any
// (a missing entry shows in the op reference test).
void document(OpDef& def, std::span<const OpDoc> table);

// Registers the op (once, at static initialisation) and returns it.
const OpDef& register_op(OpDef def);
// The op named `name`; throws if unknown.
const OpDef& find_op(const std::string& name);
// The op named `name`, or null: for ops a higher layer registers.
const OpDef* lookup_op(const std::string& name);
// Every registered op, for tests that sweep all of them.
std::vector<const OpDef*> all_ops();

// Kernel registration per (op, device); `dtypes` lists what the kernel accepts.
void register_kernel(const std::string& op, DeviceType device, std::vector<DType> dtypes,
                     KernelFn fn);
KernelFn find_kernel(const OpDef& op, DeviceType device, DType dtype);
// Whether op has a `device` kernel for `dtype` (raises when it has no
// kernel for the device at all).
bool has_kernel(const OpDef& op, DeviceType device, DType dtype);

// The dispatcher's entry (ops/dispatch.h): hands the call to the handler
// for its inputs (eager-local: infer, allocate or alias, run the kernel;
// meta; eager-global) and records it on the autograd tape when a gradient
// is needed.
TensorVector call(const OpDef& op, const TensorVector& inputs, const Attrs& attrs = {});
Tensor call1(const OpDef& op, const TensorVector& inputs, const Attrs& attrs = {});

// The work of running `op` on tensors of these metas: op.cost when set;
// otherwise every input and output byte moved once, one FLOP per output
// element (per input element for reductions), nothing for views.
OpCost op_cost(const OpDef& op, const MetaVector& inputs, const MetaVector& outputs,
               const Attrs& attrs);

// The SBP signatures of op for these inputs, all-broadcast appended.
std::vector<SbpSignature> sbp_signatures(const OpDef& op, const MetaVector& inputs,
                                         const Attrs& attrs);

}  // namespace tessera

#define TESSERA_CONCAT_INNER(a, b) a##b
#define TESSERA_CONCAT(a, b) TESSERA_CONCAT_INNER(a, b)

// TESSERA_REGISTER_KERNEL("add", cpu, add_kernel, DType::f32, DType::f64);
#define TESSERA_REGISTER_KERNEL(op_name, device, fn, ...)                             \
  static const bool TESSERA_CONCAT(kernel_registered_, __COUNTER__) = [] {           \
    ::tessera::register_kernel(op_name, ::tessera::DeviceType::device,             \
                               std::vector<::tessera::DType>{__VA_ARGS__}, fn);    \
    return true;                                                                   \
  }()
