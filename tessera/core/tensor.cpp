#include "tessera/core/tensor.h"

#include <algorithm>

#include "tessera/core/shard_trace.h"
#include "tessera/core/view_check.h"
#include "tessera/core/work_queue.h"

namespace tessera {

Tensor Tensor::empty(const Shape& shape, DType dtype, Device device) {
  // The byte count, and the strides (which skip zero dims, so a shape with a
  // zero can still overflow them), must fit in int64.
  int64_t bytes = static_cast<int64_t>(dtype_size(dtype));
  for (int64_t size : shape) {
    TESSERA_CHECK(size >= 0, "[empty] negative size in shape ", shape_str(shape));
    TESSERA_CHECK(!__builtin_mul_overflow(bytes, std::max<int64_t>(size, 1), &bytes),
                  "[empty] shape ", shape_str(shape), " of ", dtype_name(dtype),
                  " is too large: its size in bytes overflows 64 bits");
  }
  auto impl = std::make_shared<TensorImpl>();
  if (device.type != DeviceType::meta) {
    impl->storage = std::make_shared<Storage>(
        static_cast<size_t>(tessera::numel(shape)) * dtype_size(dtype), device);
  }
  impl->shape = shape;
  impl->strides = contiguous_strides(shape);
  impl->dtype = dtype;
  impl->device = device;
  return Tensor(std::move(impl));
}

Tensor Tensor::scalar(double value, DType dtype) {
  Tensor out = empty({}, dtype);
  TESSERA_DISPATCH_ALL(dtype, "scalar", [&] {
    *out.data<scalar_t>() = static_cast<scalar_t>(value);
  });
  return out;
}

int64_t Tensor::size(int64_t dim_index) const {
  int64_t d = normalize_dim(dim_index, dim(), "size");
  return dim() == 0 ? 1 : impl().shape[d];
}

bool Tensor::is_contiguous() const {
  const TensorImpl& t = impl();
  // No elements: any strides address them all in order (PyTorch's rule too).
  if (std::find(t.shape.begin(), t.shape.end(), 0) != t.shape.end()) return true;
  int64_t expected = 1;
  for (size_t i = t.shape.size(); i-- > 0;) {
    if (t.shape[i] == 1) continue;
    if (t.strides[i] != expected) return false;
    expected *= t.shape[i];
  }
  return true;
}

bool Tensor::shares_storage(const Tensor& other) const {
  if (!defined() || !other.defined()) return false;
  if (is_global() || other.is_global()) {
    Tensor a = local_shard(), b = other.local_shard();
    return a.defined() && b.defined() && !a.is_global() && !b.is_global() && a.shares_storage(b);
  }
  return impl().storage == other.impl().storage;
}

TensorMeta Tensor::meta() const {
  const TensorImpl& t = impl();
  if (t.global) return {t.shape, t.dtype, t.device, t.global->placement, t.global->sbp};
  return {t.shape, t.dtype, t.device};
}

Placement Tensor::placement() const {
  const TensorImpl& t = impl();
  return t.global ? t.global->placement : Placement();
}

NdSbp Tensor::nd_sbp() const {
  const TensorImpl& t = impl();
  return t.global ? t.global->sbp : NdSbp();
}

Tensor Tensor::local_shard() const {
  const TensorImpl& t = impl();
  return t.global ? Tensor(t.global->local) : *this;
}

Tensor make_global(const Tensor& local, const Shape& shape, DType dtype,
                   const Placement& placement, const NdSbp& sbp) {
  TESSERA_CHECK(placement.defined() && sbp.defined(), "[make_global] needs a placement and an sbp");
  TESSERA_CHECK(sbp.ndim() == placement.ndim(), "[make_global] sbp ", nd_sbp_str(sbp), " has ",
                sbp.ndim(), " axes but placement ", placement_str(placement), " has ",
                placement.ndim());
  TESSERA_CHECK(!local.defined() || !local.is_global(), "[make_global] the shard is global");
  TESSERA_CHECK(!local.defined() || local.dtype() == dtype, "[make_global] shard dtype ",
                dtype_name(local.dtype()), " differs from ", dtype_name(dtype));
  auto impl = std::make_shared<TensorImpl>();
  impl->shape = shape;
  impl->strides = contiguous_strides(shape);
  if (local.defined() && local.dim() == static_cast<int64_t>(shape.size()) && !local.is_contiguous()) {
    // The logical strides follow the shard's memory order (a transposed shard
    // makes a transposed global tensor), so layout-aware code such as
    // matmul's gradient sees the same layout either way.
    std::vector<size_t> order(shape.size());
    for (size_t d = 0; d < order.size(); ++d) order[d] = d;
    const Strides& local_strides = local.strides();
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
      return local_strides[a] > local_strides[b];
    });
    int64_t stride = 1;
    for (size_t i = order.size(); i-- > 0;) {
      impl->strides[order[i]] = stride;
      stride *= std::max<int64_t>(shape[order[i]], 1);
    }
  }
  impl->dtype = dtype;
  // A meta shard makes a plan, except under a trace (core/shard_trace.h).
  impl->device = local.defined() && local.is_meta() && !tracing_shards()
                     ? Device::meta()
                     : Device{placement.device_type(), 0};
  impl->global = std::make_shared<GlobalState>();
  impl->global->placement = placement;
  impl->global->sbp = sbp;
  impl->global->local = local.impl_ptr();
  return Tensor(std::move(impl));
}

namespace {
thread_local bool shard_trace_active = false;
}  // namespace

bool tracing_shards() {
  return shard_trace_active;
}

ShardTraceScope::ShardTraceScope() : previous_(shard_trace_active) {
  shard_trace_active = true;
}
ShardTraceScope::~ShardTraceScope() {
  shard_trace_active = previous_;
}

Tensor make_global_meta(const Shape& shape, DType dtype, const Placement& placement,
                        const NdSbp& sbp) {
  Tensor out = make_global(Tensor(), shape, dtype, placement, sbp);
  out.impl().device = Device::meta();
  return out;
}

Tensor Tensor::to_meta() const {
  const TensorImpl& t = impl();
  if (t.global) return make_global_meta(t.shape, t.dtype, t.global->placement, t.global->sbp);
  if (t.device.type == DeviceType::meta) return *this;
  Tensor out = empty(t.shape, t.dtype, Device::meta());
  out.impl().strides = t.strides;  // layout-aware rules see the same layout
  return out;
}

bool Tensor::has_no_values() const {
  const TensorImpl& t = impl();
  if (t.device.type == DeviceType::meta) return true;
  return t.global && t.global->local && t.global->local->device.type == DeviceType::meta;
}

void Tensor::fail_no_values(const char* op, const char* where, int line) const {
  // The file's last two path components: enough to find it, and the same
  // wherever the sources were built.
  std::string file = where != nullptr ? where : "";
  const size_t last = file.rfind('/');
  const size_t before =
      last == std::string::npos || last == 0 ? std::string::npos : file.rfind('/', last - 1);
  if (before != std::string::npos) file = file.substr(before + 1);
  TESSERA_FAIL("[", op, "] a ", is_meta() ? "meta tensor (" : "global tensor around a meta shard (",
               shape_str(shape()), ", ", dtype_name(dtype()), ") has no data, read at ", file, ":",
               line,
               ": it describes a tensor for tracing and planning; run the computation on real ",
               "tensors to read values");
}

void* Tensor::raw_data() const {
  const TensorImpl& t = impl();
  TESSERA_CHECK(t.device.type != DeviceType::meta, "[tensor] a meta tensor (", shape_str(t.shape),
                ", ", dtype_name(t.dtype),
                ") has no data: it describes a tensor for tracing and planning; run the ",
                "computation on real tensors to read values");
  TESSERA_CHECK(!t.global, "[tensor] a global tensor (", placement_str(t.global->placement), ", ",
                nd_sbp_str(t.global->sbp), ") has no data of its own here; use to_local() for ",
                "this rank's shard");
  // Memory an asynchronous collective still writes is read once it has
  // finished (work on a queue's own thread runs in order and never waits).
  if (t.storage->has_pending() && !WorkQueue::on_any_queue_thread()) t.storage->wait_pending();
  return static_cast<char*>(t.storage->data()) + t.offset * static_cast<int64_t>(dtype_size(t.dtype));
}

Tensor& Tensor::set_requires_grad(bool value) {
  TESSERA_CHECK(!value || is_floating(dtype()), "[requires_grad] only floating tensors can ",
                "require gradients; this one is ", dtype_name(dtype()));
  TESSERA_CHECK(is_leaf(), "[requires_grad] can only be set on leaf tensors; use detach() to ",
                "make a new leaf");
  impl().requires_grad = value;
  return *this;
}

Tensor Tensor::detach() const {
  const TensorImpl& t = impl();
  if (t.global) {
    Tensor local = local_shard();
    return make_global(local.defined() ? local.detach() : Tensor(), t.shape, t.dtype,
                       t.global->placement, t.global->sbp);
  }
  return make_alias(*this, t.shape, t.strides, t.offset);
}

uint64_t Tensor::version() const {
  const TensorImpl& t = impl();
  if (t.global) return t.global->local ? t.global->local->storage->version() : 0;
  return t.storage ? t.storage->version() : 0;
}

void Tensor::bump_version() const {
  const TensorImpl& t = impl();
  if (t.global) {
    if (t.global->local) t.global->local->storage->bump_version();
  } else if (t.storage) {
    t.storage->bump_version();
  }
}

void check_view_in_memory(const Shape& shape, const Strides& strides, int64_t offset,
                          int64_t elements) {
  TESSERA_CHECK(shape.size() == strides.size(), "[view] internal error: shape ", shape_str(shape),
                " has ", shape.size(), " dims but ", strides.size(), " strides");
  if (elements < 0 || numel(shape) == 0) return;
  int64_t lowest = offset, highest = offset;
  bool overflow = false;
  for (size_t d = 0; d < shape.size(); ++d) {
    int64_t reach = 0;
    overflow = overflow || __builtin_mul_overflow(shape[d] - 1, strides[d], &reach);
    overflow = overflow || __builtin_add_overflow(reach < 0 ? lowest : highest, reach,
                                                  reach < 0 ? &lowest : &highest);
  }
  TESSERA_CHECK(!overflow && lowest >= 0 && highest < elements, "[view] a view of shape ",
                shape_str(shape), ", strides ", shape_str(strides), " and offset ", offset,
                " reaches elements ", lowest, " to ", highest, " of memory holding ", elements,
                " (valid: 0 to ", elements - 1, ")");
}

Tensor make_alias(const Tensor& base, const Shape& shape, const Strides& strides,
                  int64_t offset) {
  auto impl = std::make_shared<TensorImpl>();
  const TensorImpl& b = base.impl();
  // Every element the view can reach must lie in the base's memory: a view
  // op whose attrs no host method checked (a graph re-planned for a new
  // size evaluates them) must fail here, not read or write past the end.
  const bool in_memory = b.storage != nullptr && b.device.type != DeviceType::meta;
  check_view_in_memory(shape, strides, offset,
                       in_memory ? static_cast<int64_t>(b.storage->nbytes() /
                                                        std::max<size_t>(1, dtype_size(b.dtype)))
                                 : -1);
  impl->storage = b.storage;
  impl->offset = offset;
  impl->shape = shape;
  impl->strides = strides;
  impl->dtype = b.dtype;
  impl->device = b.device;
  return Tensor(std::move(impl));
}

}  // namespace tessera
