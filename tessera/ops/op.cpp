#include "tessera/ops/op.h"

#include <algorithm>
#include <map>
#include <mutex>

#include "tessera/ops/workspace_region.h"

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

const char* op_kind_name(OpKind kind) {
  switch (kind) {
    case OpKind::other:
      return "other";
    case OpKind::elementwise:
      return "elementwise";
    case OpKind::reduction:
      return "reduction";
    case OpKind::view:
      return "view";
    case OpKind::matmul:
      return "matmul";
    case OpKind::convolution:
      return "convolution";
    case OpKind::normalization:
      return "normalization";
    case OpKind::indexing:
      return "indexing";
    case OpKind::random:
      return "random";
    case OpKind::collective:
      return "collective";
  }
  return "other";
}

const OpDef& register_op(OpDef def) {
  auto& ops = registry().ops;
  if (def.view) def.kind = OpKind::view;
  TESSERA_CHECK(ops.find(def.name) == ops.end(), "[register_op] op '", def.name,
                "' is registered twice");
  TESSERA_CHECK(def.infer != nullptr, "[register_op] op '", def.name,
                "' has no inference function");
  auto owned = std::make_unique<OpDef>(std::move(def));
  const OpDef& ref = *owned;
  ops.emplace(ref.name, std::move(owned));
  return ref;
}

namespace {
thread_local LentWorkspace* lent_workspace = nullptr;  // the innermost scope
}  // namespace

LentWorkspace::LentWorkspace(void* region, size_t bytes)
    : region_(static_cast<char*>(region)), bytes_(bytes), outer_(lent_workspace) {
  lent_workspace = this;
}

LentWorkspace::~LentWorkspace() {
  lent_workspace = outer_;
}

void* LentWorkspace::take(size_t bytes) {
  const size_t start = used_;
  used_ += (std::max<size_t>(bytes, 1) + kLentAlignment - 1) / kLentAlignment * kLentAlignment;
  return region_ != nullptr && used_ <= bytes_ ? region_ + start : nullptr;
}

void* Workspace::allocate(size_t bytes) {
  bytes_ += bytes;
  // (Only CPU memory is lent.)
  if (lent_workspace != nullptr && device_.type == DeviceType::cpu) {
    if (void* lent = lent_workspace->take(bytes)) return lent;
  }
  blocks_.push_back(std::make_unique<Storage>(std::max<size_t>(bytes, 1), device_));
  return blocks_.back()->data();
}

const OpDef* lookup_op(const std::string& name) {
  auto& ops = registry().ops;
  auto it = ops.find(name);
  return it == ops.end() ? nullptr : it->second.get();
}

const OpDef& find_op(const std::string& name) {
  const OpDef* op = lookup_op(name);
  TESSERA_CHECK(op != nullptr, "[find_op] no op named '", name, "'");
  return *op;
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
                  device_str(Device{device, 0}),
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

bool has_kernel(const OpDef& op, DeviceType device, DType dtype) {
  return supports(kernel_entry(op, device), dtype);
}

KernelFn find_kernel(const OpDef& op, DeviceType device, DType dtype) {
  const KernelEntry& entry = kernel_entry(op, device);
  TESSERA_CHECK(supports(entry, dtype), "[", op.name, "] no ", device_str(Device{device, 0}),
                " kernel for dtype ", dtype_name(dtype), "; supported: ", dtype_list(entry.dtypes));
  return entry.fn;
}

OpCost op_cost(const OpDef& op, const MetaVector& inputs, const MetaVector& outputs,
               const Attrs& attrs) {
  if (op.cost) return op.cost(inputs, outputs, attrs);
  if (op.kind == OpKind::view) return {};
  OpCost cost;
  double input_elements = 0, output_elements = 0;
  for (const TensorMeta& meta : inputs) {
    input_elements += static_cast<double>(numel(meta.shape));
    cost.bytes +=
        static_cast<double>(numel(meta.shape)) * static_cast<double>(dtype_size(meta.dtype));
  }
  for (const TensorMeta& meta : outputs) {
    output_elements += static_cast<double>(numel(meta.shape));
    cost.bytes +=
        static_cast<double>(numel(meta.shape)) * static_cast<double>(dtype_size(meta.dtype));
  }
  cost.flops = op.kind == OpKind::reduction ? input_elements : output_elements;
  return cost;
}

std::vector<SbpSignature> sbp_signatures(const OpDef& op, const MetaVector& inputs,
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
