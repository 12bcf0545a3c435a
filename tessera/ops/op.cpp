#include "tessera/ops/op.h"

#include <algorithm>
#include <map>
#include <mutex>

#include "tessera/core/grad_mode.h"
#include "tessera/ops/elementwise.h"

namespace tessera {

namespace {

struct KernelEntry {
  KernelFn fn = nullptr;
  std::vector<DType> dtypes;
};

struct Registry {
  std::map<std::string, std::unique_ptr<OpDef>> ops;
  std::map<std::string, KernelEntry> kernels[kNumDeviceTypes];
};

Registry& registry() {
  static Registry* instance = new Registry();
  return *instance;
}

std::string dtype_list(const std::vector<DType>& dtypes) {
  std::string text;
  for (size_t i = 0; i < dtypes.size(); ++i) text += (i ? ", " : "") + std::string(dtype_name(dtypes[i]));
  return text;
}

}  // namespace

void document(OpDef& def, std::span<const OpDoc> table) {
  for (const OpDoc& doc : table) {
    if (def.name != doc.name) continue;
    def.torch_name = doc.torch_name;
    def.signature = doc.signature;
    return;
  }
}

const OpDef& register_op(OpDef def) {
  auto& ops = registry().ops;
  TESSERA_CHECK(ops.find(def.name) == ops.end(), "[register_op] op '", def.name,
                "' is registered twice");
  TESSERA_CHECK(def.infer != nullptr, "[register_op] op '", def.name,
                "' has no inference function");
  auto owned = std::make_unique<OpDef>(std::move(def));
  const OpDef& ref = *owned;
  ops.emplace(ref.name, std::move(owned));
  return ref;
}

const OpDef& find_op(const std::string& name) {
  auto& ops = registry().ops;
  auto it = ops.find(name);
  TESSERA_CHECK(it != ops.end(), "[find_op] no op named '", name, "'");
  return *it->second;
}

std::vector<const OpDef*> all_ops() {
  std::vector<const OpDef*> out;
  for (auto& [name, def] : registry().ops) out.push_back(def.get());
  return out;
}

void register_kernel(const std::string& op, DeviceType device, std::vector<DType> dtypes,
                     KernelFn fn) {
  auto& table = registry().kernels[static_cast<int>(device)];
  TESSERA_CHECK(table.find(op) == table.end(), "[register_kernel] kernel for '", op,
                "' registered twice");
  table[op] = KernelEntry{fn, std::move(dtypes)};
}

namespace {

const KernelEntry& kernel_entry(const OpDef& op, DeviceType device) {
  int device_index = static_cast<int>(device);
  auto* entry = static_cast<const KernelEntry*>(
      op.kernel_cache->entry[device_index].load(std::memory_order_acquire));
  if (entry == nullptr) {
    auto& table = registry().kernels[device_index];
    auto it = table.find(op.name);
    TESSERA_CHECK(it != table.end(), "[", op.name, "] no kernel registered for device ",
                  device == DeviceType::cpu ? "cpu" : "cuda",
                  device == DeviceType::cpu
                      ? ""
                      : " (Tessera has no CUDA kernels yet: CUDA tensors support copies and "
                        "collectives only; move the inputs with .cpu())");
    entry = &it->second;
    op.kernel_cache->entry[device_index].store(entry, std::memory_order_release);
  }
  return *entry;
}

bool supports(const KernelEntry& entry, DType dtype) {
  return std::find(entry.dtypes.begin(), entry.dtypes.end(), dtype) != entry.dtypes.end();
}

}  // namespace

KernelFn find_kernel(const OpDef& op, DeviceType device, DType dtype) {
  const KernelEntry& entry = kernel_entry(op, device);
  TESSERA_CHECK(supports(entry, dtype), "[", op.name, "] no ",
                device == DeviceType::cpu ? "cpu" : "cuda", " kernel for dtype ", dtype_name(dtype),
                "; supported: ", dtype_list(entry.dtypes));
  return entry.fn;
}

namespace {

// bf16 and f16 are computed in f32 where an op has no kernel of their own,
// as PyTorch's CPU kernels compute them: the 16-bit inputs widened, the op
// run, each output rounded to the dtype the op gives it. The casts are ops,
// so gradients flow through them.
bool computes_widened(const OpDef& op, const std::vector<Tensor>& inputs, DType kernel_dtype,
                      DeviceType device) {
  if (inputs.empty() || (kernel_dtype != DType::bf16 && kernel_dtype != DType::f16)) return false;
  const KernelEntry& entry = kernel_entry(op, device);
  return !supports(entry, kernel_dtype) && supports(entry, DType::f32);
}

std::vector<Tensor> call_widened(const OpDef& op, const std::vector<Tensor>& inputs,
                                 const Attrs& attrs, const std::vector<TensorMeta>& output_metas) {
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

}  // namespace

std::vector<Tensor> call(const OpDef& op, const std::vector<Tensor>& inputs, const Attrs& attrs) {
  std::vector<TensorMeta> input_metas;
  input_metas.reserve(inputs.size());
  bool any_requires_grad = false;
  bool any_global = false;
  for (size_t i = 0; i < inputs.size(); ++i) {
    TESSERA_CHECK(inputs[i].defined(), "[", op.name, "] input ", i, " is an undefined tensor");
    input_metas.push_back(inputs[i].meta());
    any_requires_grad = any_requires_grad || inputs[i].requires_grad();
    any_global = any_global || inputs[i].is_global();
    TESSERA_CHECK(inputs[i].device() == inputs[0].device(), "[", op.name,
                  "] inputs are on different devices: ", device_str(inputs[0].device()), " and ",
                  device_str(inputs[i].device()));
  }

  std::vector<Tensor> outputs;
  if (any_global) {
    GradModeGuard no_grad(false);  // the tape records the logical op below
    outputs = global_call(op, inputs, attrs);
  } else if (op.view) {
    op.infer(input_metas, attrs);  // checks the arguments
    outputs.push_back(op.view(inputs, attrs));
  } else {
    std::vector<TensorMeta> output_metas = op.infer(input_metas, attrs);
    DType kernel_dtype = op.kernel_dtype_input >= 0 && !inputs.empty()
                             ? inputs[op.kernel_dtype_input].dtype()
                             : output_metas.at(0).dtype;
    Device device = inputs.empty() ? output_metas.at(0).device : inputs[0].device();
    if (computes_widened(op, inputs, kernel_dtype, device.type)) {
      return call_widened(op, inputs, attrs, output_metas);
    }
    // Before allocating, so a missing kernel costs no device memory.
    KernelFn kernel = find_kernel(op, device.type, kernel_dtype);
    outputs.reserve(output_metas.size());
    for (const TensorMeta& meta : output_metas) {
      outputs.push_back(Tensor::empty(meta.shape, meta.dtype, meta.device));
    }
    KernelContext context{op, inputs, outputs, attrs};
    GradModeGuard no_grad(false);  // helpers a kernel calls (contiguous()) are not on the tape
    kernel(context);
  }

  if (op.view) {
    // The root whose storage this views, so in-place writes can check it.
    const TensorImpl& base = inputs[0].impl();
    outputs[0].impl().view_base = base.view_base ? base.view_base : inputs[0].impl_ptr();
  }
  if (any_requires_grad && grad_enabled() && op.differentiable) {
    record_node(op, inputs, attrs, outputs);
  }
  return outputs;
}

Tensor call1(const OpDef& op, const std::vector<Tensor>& inputs, const Attrs& attrs) {
  return call(op, inputs, attrs)[0];
}

std::vector<SbpSignature> sbp_signatures(const OpDef& op, const std::vector<TensorMeta>& inputs,
                                         const Attrs& attrs) {
  std::vector<SbpSignature> signatures;
  if (op.sbp) signatures = op.sbp(inputs, attrs);
  size_t num_outputs = op.infer(inputs, attrs).size();
  SbpSignature broadcast{std::vector<Sbp>(inputs.size(), Sbp::broadcast()),
                         std::vector<Sbp>(num_outputs, Sbp::broadcast())};
  if (std::find(signatures.begin(), signatures.end(), broadcast) == signatures.end()) {
    signatures.push_back(broadcast);
  }
  return signatures;
}

}  // namespace tessera
