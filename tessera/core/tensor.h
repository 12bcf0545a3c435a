#pragma once

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "tessera/core/device.h"
#include "tessera/core/dtype.h"
#include "tessera/core/error.h"
#include "tessera/core/placement.h"
#include "tessera/core/shape.h"
#include "tessera/core/small_vector.h"
#include "tessera/core/storage.h"

namespace tessera {

class Node;  // autograd/node.h

// Shape, dtype and device without data: what inference functions consume
// and produce.
// For a global tensor the shape is the logical one, and placement and sbp
// say how it is spread (both undefined for local tensors).
struct TensorMeta {
  Shape shape;
  DType dtype = DType::f32;
  Device device;
  Placement placement = {};
  NdSbp sbp = {};

  bool is_global() const { return placement.defined(); }
};

// The metas of one op call's inputs or outputs: a few, kept inline.
using MetaVector = SmallVector<TensorMeta, 4>;

struct TensorImpl;

// What a global tensor holds beyond its logical shape and dtype: where it
// lives, how it maps onto those ranks, and the shard this rank holds
// (null on ranks outside the placement).
struct GlobalState {
  Placement placement;
  NdSbp sbp;
  std::shared_ptr<TensorImpl> local;
};

struct TensorImpl {
  // User-provided, so make_shared<TensorImpl>() runs the member initialisers
  // only, without first zeroing the object (the dims kept inline).
  TensorImpl() {}  // NOLINT(modernize-use-equals-default)

  std::shared_ptr<Storage> storage;
  int64_t offset = 0;  // in elements
  Shape shape;
  Strides strides;
  DType dtype = DType::f32;
  Device device;
  // Autograd.
  bool requires_grad = false;
  std::shared_ptr<TensorImpl> grad;
  std::shared_ptr<Node> grad_fn;
  int output_nr = 0;  // which output of grad_fn this tensor is
  // For a view made by a view op: the tensor whose storage it views (the
  // root, for a view of a view). In-place writes consult it: a view of a
  // leaf that requires grad may not be written while grad mode is on.
  std::shared_ptr<TensorImpl> view_base;
  // Null for local tensors. A global tensor has no storage of its own: shape
  // is the logical shape and the data lives in global->local.
  std::shared_ptr<GlobalState> global;
};

class Scalar;  // ops/scalar.h: a number passed where a tensor could be
namespace indexing {
class TensorIndex;  // ops/indexing.h
}

// A cheap value handle: copies share the same tensor (like torch.Tensor or
// mlx::array). Views share storage with their base.
class Tensor {
 public:
  Tensor() = default;
  explicit Tensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}

  // New uninitialised contiguous tensor; on Device::meta() one without
  // storage.
  static Tensor empty(const Shape& shape, DType dtype = DType::f32, Device device = {});
  // Copies `values` into a new tensor of `shape` (numel must match).
  template <typename T>
  static Tensor from_vector(const std::vector<T>& values, const Shape& shape);
  // A 0-d tensor.
  static Tensor scalar(double value, DType dtype = DType::f32);

  bool defined() const { return impl_ != nullptr; }
  const Shape& shape() const { return impl().shape; }
  const Strides& strides() const { return impl().strides; }
  int64_t size(int64_t dim) const;
  int64_t dim() const { return static_cast<int64_t>(impl().shape.size()); }
  int64_t numel() const { return tessera::numel(impl().shape); }
  DType dtype() const { return impl().dtype; }
  Device device() const { return impl().device; }
  int64_t offset() const { return impl().offset; }
  TensorMeta meta() const;
  bool is_contiguous() const;
  // True when two handles refer to the same tensor (not just the same storage).
  bool is_same(const Tensor& other) const { return impl_ == other.impl_; }
  bool shares_storage(const Tensor& other) const;

  // Global tensors (DESIGN §4): a logical tensor spread over a placement.
  bool is_global() const { return impl().global != nullptr; }
  // A tensor without data (Device::meta(); for a global one, every rank's
  // shard too): ops on it run inference and SBP rules only.
  bool is_meta() const { return impl().device.type == DeviceType::meta; }
  // A meta tensor of the same shape and dtype (and placement and SBP); no
  // autograd.
  Tensor to_meta() const;
  // The placement and SBP of a global tensor (undefined for a local one).
  Placement placement() const;
  NdSbp nd_sbp() const;
  // This rank's shard of a global tensor, sharing its storage (undefined on
  // ranks outside the placement); a local tensor returns itself. Outside
  // autograd: use to_local() in differentiable code.
  Tensor local_shard() const;
  // Redistributes to `placement` and `sbp` (boxing); differentiable. On a
  // local tensor: builds the global tensor of which this is the local piece
  // (a split shard, a partial value, or for broadcast a copy: the data of
  // the placement's first rank is used everywhere).
  Tensor to_global(const Placement& placement, const NdSbp& sbp) const;
  // The shard this rank holds, as a local tensor; differentiable.
  Tensor to_local() const;

  // Address of element 0 of this view: device memory for a CUDA tensor,
  // which the host must not read (copy with cpu() first).
  void* raw_data() const;
  // Typed address of element 0 of a CPU tensor (raises for other devices).
  template <typename T>
  T* data() const;
  // The value of a one-element tensor (copied to the CPU first if needed).
  // `file` and `line` (the caller's, by default) name the read in the error
  // a tensor without values raises: a meta tensor, or a graph trace's
  // stand-in, read inside a traced function. (The builtins, not
  // std::source_location, which not every supported compiler provides.)
  template <typename T>
  T item(const char* file = __builtin_FILE(), int line = __builtin_LINE()) const;
  // Copies the elements (in logical row-major order) out, converting to T;
  // a CUDA tensor is copied to the CPU first. On a global tensor this
  // gathers the logical values (a collective).
  template <typename T>
  std::vector<T> to_vector(const char* file = __builtin_FILE(), int line = __builtin_LINE()) const;
  // Whether the tensor has no values to read: a meta tensor, or a global
  // tensor around a meta shard (a graph trace's stand-in).
  bool has_no_values() const;
  // Raises the error of reading such a tensor with `op` at `file`:`line`.
  [[noreturn]] void fail_no_values(const char* op, const char* file, int line) const;

  // Autograd.
  bool requires_grad() const { return impl().requires_grad; }
  // Marks a floating leaf tensor as requiring gradients; returns *this.
  Tensor& set_requires_grad(bool value = true);
  // libtorch's name for set_requires_grad.
  Tensor& requires_grad_(bool value = true) { return set_requires_grad(value); }
  bool is_leaf() const { return impl().grad_fn == nullptr; }
  Tensor grad() const { return Tensor(impl().grad); }
  void set_grad(const Tensor& grad) { impl().grad = grad.impl_; }
  const std::shared_ptr<Node>& grad_fn() const { return impl().grad_fn; }
  // Accumulates d(this)/d(leaf) into every leaf's .grad. A non-scalar
  // tensor needs `gradient` of its own shape.
  void backward(const Tensor& gradient = Tensor(), bool retain_graph = false,
                bool create_graph = false) const;
  // Same data, cut from the graph (it shares the version counter).
  Tensor detach() const;
  // True for a tensor made by a view op (reshape, narrow, ...), whose data
  // is its base's.
  bool is_view() const { return impl().view_base != nullptr; }
  // The storage's count of in-place writes (see Storage::version); 0 for a
  // global tensor on a rank outside its placement.
  uint64_t version() const;
  // Records an in-place write to this tensor's data. Every in-place op calls
  // it; code that writes through data<T>() must call it too.
  void bump_version() const;

  // Views (share storage) and shape methods; see ops/view.h.
  Tensor reshape(const Shape& shape) const;
  Tensor view(const Shape& shape) const;
  Tensor permute(const std::vector<int64_t>& dims) const;
  Tensor transpose(int64_t dim0, int64_t dim1) const;
  // PyTorch's t(): 0-d and 1-D tensors as they are, 2-D transposed.
  Tensor t() const;
  Tensor narrow(int64_t dim, int64_t start, int64_t length) const;
  Tensor slice(int64_t dim, int64_t start, int64_t end, int64_t step = 1) const;
  Tensor select(int64_t dim, int64_t index) const;
  Tensor expand(const Shape& shape) const;
  Tensor squeeze(std::optional<int64_t> dim = std::nullopt) const;
  Tensor unsqueeze(int64_t dim) const;
  Tensor flatten(int64_t start_dim = 0, int64_t end_dim = -1) const;
  Tensor contiguous() const;
  Tensor clone() const;
  Tensor to(DType dtype) const;
  // A copy on `device` (this tensor itself when already there), contiguous,
  // complete when it returns. Not recorded by autograd yet: a tensor that
  // requires grad must be detached (or copied under NoGradGuard). A cuda
  // device that does not exist, or a build without CUDA, raises naming the
  // valid devices.
  Tensor to(Device device) const;
  // to(cuda:index).
  Tensor cuda(int index = 0) const;
  // to(cpu).
  Tensor cpu() const;

  // In-place writes; `src` is cast to this dtype and broadcast to this
  // shape, and the destination may be a strided view (on the CPU; an
  // expanded one, whose elements share memory, is refused). Under NoGradGuard
  // (optimizers, initialisers, load_state_dict) they only write. With grad
  // mode on, as in PyTorch: a leaf that requires grad, or a view of one, is
  // refused; writing into a tensor of the graph records the copy (the old
  // value gets no gradient, `src` gets it; written through a view of a
  // contiguous base, the base records it, as PyTorch's CopySlices); and
  // tensors a recorded op saved for its gradient make backward fail once
  // they are overwritten.
  Tensor& copy_(const Tensor& src);
  Tensor& fill_(double value);
  Tensor& zero_() { return fill_(0.0); }

  // Method forms of the ops and in-place arithmetic, as libtorch's (defined
  // in ops/tensor_methods.cpp; the free functions of ops/ document them).
  Tensor sum(const std::vector<int64_t>& dims = {}, bool keepdim = false) const;
  Tensor mean(const std::vector<int64_t>& dims = {}, bool keepdim = false) const;
  Tensor max() const;
  Tensor min() const;
  Tensor argmax(std::optional<int64_t> dim = std::nullopt, bool keepdim = false) const;
  Tensor argmin(std::optional<int64_t> dim = std::nullopt, bool keepdim = false) const;
  Tensor matmul(const Tensor& other) const;
  Tensor softmax(int64_t dim, std::optional<DType> dtype = std::nullopt) const;
  Tensor log_softmax(int64_t dim, std::optional<DType> dtype = std::nullopt) const;
  Tensor norm(double p = 2.0, const std::vector<int64_t>& dims = {}, bool keepdim = false) const;
  Tensor neg() const;
  Tensor abs() const;
  Tensor exp() const;
  Tensor log() const;
  Tensor sqrt() const;
  Tensor rsqrt() const;
  Tensor sin() const;
  Tensor cos() const;
  Tensor tanh() const;
  Tensor sigmoid() const;
  Tensor relu() const;
  Tensor square() const;
  Tensor pow(const Tensor& exponent) const;
  Tensor pow(Scalar exponent) const;
  Tensor clamp(std::optional<double> min, std::optional<double> max) const;
  // Reductions, scans and sorting (ops/reduce.h, ops/scan.h).
  std::tuple<Tensor, Tensor> max(int64_t dim, bool keepdim = false) const;
  std::tuple<Tensor, Tensor> min(int64_t dim, bool keepdim = false) const;
  Tensor amax(const std::vector<int64_t>& dims = {}, bool keepdim = false) const;
  Tensor amin(const std::vector<int64_t>& dims = {}, bool keepdim = false) const;
  Tensor prod() const;
  Tensor prod(int64_t dim, bool keepdim = false) const;
  Tensor all() const;
  Tensor all(int64_t dim, bool keepdim = false) const;
  Tensor any() const;
  Tensor any(int64_t dim, bool keepdim = false) const;
  Tensor var(const std::vector<int64_t>& dims = {}, int64_t correction = 1,
             bool keepdim = false) const;
  Tensor std(const std::vector<int64_t>& dims = {}, int64_t correction = 1,
             bool keepdim = false) const;
  Tensor logsumexp(const std::vector<int64_t>& dims, bool keepdim = false) const;
  Tensor count_nonzero(const std::vector<int64_t>& dims = {}) const;
  Tensor cumsum(int64_t dim) const;
  Tensor cumprod(int64_t dim) const;
  std::tuple<Tensor, Tensor> sort(int64_t dim = -1, bool descending = false) const;
  Tensor argsort(int64_t dim = -1, bool descending = false) const;
  std::tuple<Tensor, Tensor> topk(int64_t k, int64_t dim = -1, bool largest = true,
                                  bool sorted = true) const;
  // Elementwise (ops/elementwise.h, ops/math.h).
  Tensor add(const Tensor& other) const;
  Tensor add(Scalar other) const;
  Tensor sub(const Tensor& other) const;
  Tensor sub(Scalar other) const;
  Tensor mul(const Tensor& other) const;
  Tensor mul(Scalar other) const;
  Tensor div(const Tensor& other) const;
  Tensor div(Scalar other) const;
  Tensor eq(const Tensor& other) const;
  Tensor eq(Scalar other) const;
  Tensor ne(const Tensor& other) const;
  Tensor ne(Scalar other) const;
  Tensor lt(const Tensor& other) const;
  Tensor lt(Scalar other) const;
  Tensor le(const Tensor& other) const;
  Tensor le(Scalar other) const;
  Tensor gt(const Tensor& other) const;
  Tensor gt(Scalar other) const;
  Tensor ge(const Tensor& other) const;
  Tensor ge(Scalar other) const;
  Tensor maximum(const Tensor& other) const;
  Tensor minimum(const Tensor& other) const;
  Tensor remainder(const Tensor& other) const;
  Tensor remainder(Scalar other) const;
  Tensor fmod(const Tensor& other) const;
  Tensor fmod(Scalar other) const;
  Tensor logical_not() const;
  Tensor logical_and(const Tensor& other) const;
  Tensor logical_or(const Tensor& other) const;
  Tensor floor() const;
  Tensor ceil() const;
  Tensor round(int64_t decimals = 0) const;
  Tensor trunc() const;
  Tensor frac() const;
  Tensor sign() const;
  Tensor reciprocal() const;
  Tensor log1p() const;
  Tensor expm1() const;
  Tensor log2() const;
  Tensor log10() const;
  Tensor erf() const;
  Tensor erfc() const;
  Tensor isnan() const;
  Tensor isinf() const;
  Tensor isfinite() const;
  Tensor nan_to_num(double nan = 0.0, std::optional<double> posinf = std::nullopt,
                    std::optional<double> neginf = std::nullopt) const;
  Tensor lerp(const Tensor& end, Scalar weight) const;
  Tensor where(const Tensor& condition, const Tensor& other) const;
  Tensor masked_fill(const Tensor& mask, Scalar value) const;
  Tensor masked_fill(const Tensor& mask, const Tensor& value) const;
  // Shapes and indexing (ops/shape_ops.h, ops/index.h, ops/linalg.h).
  Tensor flip(const std::vector<int64_t>& dims) const;
  Tensor roll(const std::vector<int64_t>& shifts, const std::vector<int64_t>& dims = {}) const;
  Tensor repeat(const std::vector<int64_t>& repeats) const;
  Tensor tile(const std::vector<int64_t>& reps) const;
  Tensor repeat_interleave(int64_t repeats, std::optional<int64_t> dim = std::nullopt) const;
  Tensor movedim(int64_t source, int64_t destination) const;
  Tensor swapaxes(int64_t axis0, int64_t axis1) const;
  std::vector<Tensor> unbind(int64_t dim = 0) const;
  Tensor gather(int64_t dim, const Tensor& index) const;
  Tensor index_select(int64_t dim, const Tensor& index) const;
  Tensor take_along_dim(const Tensor& indices, std::optional<int64_t> dim = std::nullopt) const;
  Tensor scatter(int64_t dim, const Tensor& index, const Tensor& src) const;
  Tensor scatter(int64_t dim, const Tensor& index, Scalar value) const;
  Tensor scatter_add(int64_t dim, const Tensor& index, const Tensor& src) const;
  Tensor scatter_reduce(int64_t dim, const Tensor& index, const Tensor& src,
                        const std::string& reduce, bool include_self = true) const;
  Tensor index_add(int64_t dim, const Tensor& index, const Tensor& source,
                   double alpha = 1.0) const;
  Tensor index_fill(int64_t dim, const Tensor& index, Scalar value) const;
  Tensor masked_select(const Tensor& mask) const;
  Tensor nonzero() const;
  Tensor mm(const Tensor& other) const;
  Tensor bmm(const Tensor& other) const;
  Tensor mv(const Tensor& vec) const;
  Tensor dot(const Tensor& other) const;
  Tensor outer(const Tensor& other) const;
  Tensor diag(int64_t diagonal = 0) const;
  Tensor diagonal(int64_t offset = 0, int64_t dim1 = 0, int64_t dim2 = 1) const;
  Tensor trace() const;
  // In place: the result is computed out of place, checked castable to this
  // dtype and written back with copy_ (so into strided views too).
  Tensor& add_(const Tensor& other);
  Tensor& add_(Scalar other);
  Tensor& sub_(const Tensor& other);
  Tensor& sub_(Scalar other);
  Tensor& mul_(const Tensor& other);
  Tensor& mul_(Scalar other);
  Tensor& div_(const Tensor& other);
  Tensor& div_(Scalar other);
  Tensor& pow_(const Tensor& exponent);
  Tensor& pow_(Scalar exponent);
  Tensor& neg_();
  Tensor& abs_();
  Tensor& exp_();
  Tensor& sqrt_();
  Tensor& relu_();
  Tensor& sigmoid_();
  Tensor& tanh_();
  Tensor& clamp_(std::optional<double> min, std::optional<double> max);
  Tensor& masked_fill_(const Tensor& mask, Scalar value);
  Tensor& masked_fill_(const Tensor& mask, const Tensor& value);
  Tensor& scatter_(int64_t dim, const Tensor& index, const Tensor& src);
  Tensor& scatter_(int64_t dim, const Tensor& index, Scalar value);
  Tensor& scatter_add_(int64_t dim, const Tensor& index, const Tensor& src);
  Tensor& scatter_reduce_(int64_t dim, const Tensor& index, const Tensor& src,
                          const std::string& reduce, bool include_self = true);
  Tensor& index_add_(int64_t dim, const Tensor& index, const Tensor& source, double alpha = 1.0);
  Tensor& index_fill_(int64_t dim, const Tensor& index, Scalar value);
  Tensor& floor_();
  Tensor& ceil_();
  Tensor& round_();
  Tensor& trunc_();
  // libtorch's indexing (ops/indexing.h): x.index({Slice(1, 3), None, 0}).
  Tensor index(const std::vector<indexing::TensorIndex>& indices) const;
  // Writes `value` (broadcast, cast) where index() selects, as Python's
  // x[indices] = value; with accumulate, adds it, duplicates included.
  Tensor& index_put_(const std::vector<indexing::TensorIndex>& indices, const Tensor& value,
                     bool accumulate = false);
  Tensor& index_put_(const std::vector<indexing::TensorIndex>& indices, Scalar value);

  TensorImpl& impl() const {
    TESSERA_CHECK(impl_ != nullptr, "[tensor] use of an undefined tensor");
    return *impl_;
  }
  const std::shared_ptr<TensorImpl>& impl_ptr() const { return impl_; }

 private:
  std::shared_ptr<TensorImpl> impl_;
};

// The tensors of one op call's inputs or outputs: a few, kept inline.
using TensorVector = SmallVector<Tensor, 4>;

// Wraps `local` (this rank's shard, undefined outside the placement) as a
// global tensor of logical `shape`. No communication and no autograd: the
// caller guarantees the shard matches the layout.
Tensor make_global(const Tensor& local, const Shape& shape, DType dtype,
                   const Placement& placement, const NdSbp& sbp);

// A global meta tensor: the logical `shape` laid out on `placement` as
// `sbp`, with no shard anywhere. Needs no process group, so plans can be
// made for meshes this job does not have.
Tensor make_global_meta(const Shape& shape, DType dtype, const Placement& placement,
                        const NdSbp& sbp);

// "tensor([1, 2], f32)"-style text for debugging and tests.
std::string to_string(const Tensor& tensor);

// Builds a view sharing `base`'s storage (no autograd; views with autograd
// are made by the view ops).
Tensor make_alias(const Tensor& base, const Shape& shape, const Strides& strides, int64_t offset);

template <typename T>
T* Tensor::data() const {
  TESSERA_CHECK(DTypeOf<T>::value == dtype(), "[tensor] data<", dtype_name(DTypeOf<T>::value),
                "> called on a ", dtype_name(dtype()), " tensor");
  TESSERA_CHECK(device().type == DeviceType::cpu, "[tensor] data<", dtype_name(DTypeOf<T>::value),
                "> reads host memory but this tensor is on ", device_str(device()),
                "; copy it with .cpu() first");
  return static_cast<T*>(raw_data());
}

template <typename T>
Tensor Tensor::from_vector(const std::vector<T>& values, const Shape& shape) {
  const int64_t count = checked_numel(shape, "from_vector");
  TESSERA_CHECK(static_cast<int64_t>(values.size()) == count, "[from_vector] got ", values.size(),
                " values for shape ", shape_str(shape), " which holds ", count);
  Tensor out = empty(shape, DTypeOf<T>::value);
  T* dst = out.data<T>();
  for (size_t i = 0; i < values.size(); ++i) dst[i] = values[i];
  return out;
}

template <typename T>
std::vector<T> Tensor::to_vector(const char* file, int line) const {
  if (has_no_values()) fail_no_values("to_vector", file, line);
  if (is_global()) {
    // The logical values: every rank of the placement gathers them (SPMD:
    // all ranks must ask together).
    Tensor whole = to_global(placement(), NdSbp::broadcast(placement().ndim())).local_shard();
    TESSERA_CHECK(whole.defined(), "[to_vector] this rank is outside the placement ",
                  placement_str(placement()), " and holds no values");
    return whole.to_vector<T>();
  }
  if (device().type != DeviceType::cpu) return detach().cpu().to_vector<T>();
  Tensor dense = to(DTypeOf<T>::value).contiguous();
  const T* src = dense.data<T>();
  return std::vector<T>(src, src + dense.numel());
}

template <typename T>
T Tensor::item(const char* file, int line) const {
  if (has_no_values()) fail_no_values("item", file, line);
  TESSERA_CHECK(numel() == 1, "[item] needs a tensor with one element, got shape ",
                shape_str(shape()));
  return to_vector<T>(file, line)[0];
}

}  // namespace tessera
