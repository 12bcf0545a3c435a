// View ops: reshape, permute, slice and expand are primitives whose outputs
// alias their input; the other shape methods compose them.

#include "tessera/ops/view.h"

#include <algorithm>
#include <numeric>

#include "tessera/core/grad_mode.h"
#include "tessera/ops/elementwise.h"
#include "tessera/ops/op.h"
#include "tessera/ops/reduce.h"

namespace tessera {

Shape infer_size(const Shape& shape, int64_t count, const char* op) {
  Shape out = shape;
  int64_t known = 1;
  int64_t infer_at = -1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == -1) {
      TESSERA_CHECK(infer_at < 0, "[", op, "] only one dimension can be -1, got ", shape_str(shape));
      infer_at = static_cast<int64_t>(i);
    } else {
      TESSERA_CHECK(shape[i] >= 0, "[", op, "] invalid size ", shape[i], " in ", shape_str(shape));
      known = checked_mul(known, shape[i], op);
    }
  }
  if (infer_at >= 0) {
    TESSERA_CHECK(known != 0 && count % known == 0, "[", op, "] cannot infer -1 in ",
                  shape_str(shape), " for ", count, " elements");
    out[infer_at] = count / known;
  }
  const int64_t holds = checked_numel(out, op);
  TESSERA_CHECK(holds == count, "[", op, "] shape ", shape_str(shape), " holds ", holds,
                " elements but the input has ", count);
  return out;
}

std::optional<Strides> view_strides(const Shape& old_shape, const Strides& old_strides,
                                    const Shape& shape) {
  // Walk both shapes in chunks of equal element count; within each chunk the
  // old dims must be contiguous with respect to each other.
  Strides strides(shape.size(), 1);
  if (numel(shape) == 0 || old_shape.empty()) {
    return contiguous_strides(shape);
  }
  int64_t view_d = static_cast<int64_t>(shape.size()) - 1;
  int64_t chunk_base_stride = old_strides.back();
  int64_t tensor_numel = 1, view_numel = 1;
  for (int64_t tensor_d = static_cast<int64_t>(old_shape.size()) - 1; tensor_d >= 0; --tensor_d) {
    tensor_numel *= old_shape[tensor_d];
    if (tensor_d == 0 ||
        (old_shape[tensor_d - 1] != 1 &&
         old_strides[tensor_d - 1] != tensor_numel * chunk_base_stride)) {
      while (view_d >= 0 && (view_numel < tensor_numel || shape[view_d] == 1)) {
        strides[view_d] = view_numel * chunk_base_stride;
        view_numel *= shape[view_d];
        --view_d;
      }
      if (view_numel != tensor_numel) return std::nullopt;
      if (tensor_d > 0) {
        chunk_base_stride = old_strides[tensor_d - 1];
        tensor_numel = 1;
        view_numel = 1;
      }
    }
  }
  if (view_d != -1) return std::nullopt;
  return strides;
}

namespace {

std::vector<Sbp> all_partials() {
  return {Sbp::partial_sum(), Sbp::partial_max(), Sbp::partial_min()};
}

void add_partials(std::vector<SbpSignature>& signatures) {
  for (Sbp partial : all_partials()) signatures.push_back({{partial}, {partial}});
}

// reshape: split axis i of the input stays a split of output axis j when the
// dims before them hold the same number of elements and either output dim j
// is input dims i..k merged (every shard, even uneven, stays a block of
// rows), or input dim i is output dims j..k (a [B*T, V] split by rows is a
// [B, T, V] split by B where each shard holds whole rows of T; layout
// choice checks each signature on the shards, and refuses it otherwise).
std::vector<SbpSignature> reshape_signatures(const Shape& in, const Shape& out) {
  std::vector<SbpSignature> signatures;
  int64_t in_prefix = 1;
  for (size_t i = 0; i < in.size(); ++i) {
    int64_t out_prefix = 1;
    for (size_t j = 0; j < out.size(); ++j) {
      if (out_prefix == in_prefix) {
        int64_t merged = 1;
        for (size_t k = i; k < in.size() && merged < out[j]; ++k) merged *= in[k];
        int64_t parts = 1;
        for (size_t k = j; k < out.size() && parts < in[i]; ++k) parts *= out[k];
        const bool merges = in[i] > 0 && merged == out[j] && out[j] % in[i] == 0 && out[j] >= in[i];
        const bool divides = out[j] > 1 && parts == in[i] && in[i] > out[j];
        if (merges || divides) {
          signatures.push_back({{Sbp::split(static_cast<int64_t>(i))},
                                {Sbp::split(static_cast<int64_t>(j))}});
          break;
        }
      }
      out_prefix *= out[j];
    }
    in_prefix *= in[i];
  }
  add_partials(signatures);
  return signatures;
}

const OpDef& reshape_op = register_op([] {
  OpDef def;
  def.name = "reshape";
  def.torch_name = "torch.reshape, torch.Tensor.view";
  def.signature = "x.reshape(shape), x.view(shape)";
  def.infer = [](const MetaVector& in, const Attrs& attrs) {
    return MetaVector{{attrs.ints("shape"), in[0].dtype, in[0].device}};
  };
  def.sbp = [](const MetaVector& in, const Attrs& attrs) {
    return reshape_signatures(in[0].shape, attrs.ints("shape"));
  };
  def.localize = [](const Attrs& attrs, const MetaVector& local, const MetaVector& logical,
                    const ShardOffsets&) {
    const Shape& logical_out = attrs.ints("shape");
    Shape out = logical_out;
    const Shape& local_in = local[0].shape;
    const Shape& logical_in = logical[0].shape;
    int64_t prefix = 1;
    for (size_t i = 0; i < logical_in.size(); ++i) {
      if (local_in[i] != logical_in[i]) {  // a split dim (several on n-D meshes)
        int64_t out_prefix = 1;
        for (size_t j = 0; j < out.size(); ++j) {
          if (out_prefix == prefix && logical_in[i] > 0 && logical_out[j] % logical_in[i] == 0) {
            out[j] = logical_out[j] / logical_in[i] * local_in[i];  // dims merged
            break;
          }
          if (out_prefix == prefix && logical_out[j] > 0 && logical_in[i] % logical_out[j] == 0) {
            // A dim divided: a shard of whole inner blocks (else the shapes
            // do not match, and layout choice refuses the signature).
            out[j] = local_in[i] / (logical_in[i] / logical_out[j]);
            break;
          }
          out_prefix *= logical_out[j];
        }
      }
      prefix *= logical_in[i];
    }
    Attrs result = attrs;
    result.set("shape", out);
    return result;
  };
  def.view = [](const std::vector<Tensor>& in, const Attrs& attrs) {
    const Tensor& x = in[0];
    const Shape& shape = attrs.ints("shape");
    if (auto strides = view_strides(x.shape(), x.strides(), shape)) {
      return make_alias(x, shape, *strides, x.offset());
    }
    NoGradGuard no_grad;  // the copy is internal; the tape records reshape itself
    Tensor dense = copy(x);
    return make_alias(dense, shape, contiguous_strides(shape), 0);
  };
  def.saves_inputs = false;
  def.grad = [](const GradContext& c) {
    return std::vector<Tensor>{c.grad_output(0).reshape(c.input_meta(0).shape)};
  };
  return def;
}());

const OpDef& permute_op = register_op([] {
  OpDef def;
  def.name = "permute";
  def.torch_name = "torch.permute, torch.transpose";
  def.signature = "x.permute(dims), x.transpose(d0, d1)";
  def.infer = [](const MetaVector& in, const Attrs& attrs) {
    Shape shape;
    for (int64_t d : attrs.ints("dims")) shape.push_back(in[0].shape[d]);
    return MetaVector{{shape, in[0].dtype, in[0].device}};
  };
  def.sbp = [](const MetaVector&, const Attrs& attrs) {
    const auto& dims = attrs.ints("dims");
    std::vector<SbpSignature> signatures;
    for (size_t j = 0; j < dims.size(); ++j) {
      signatures.push_back({{Sbp::split(dims[j])}, {Sbp::split(static_cast<int64_t>(j))}});
    }
    add_partials(signatures);
    return signatures;
  };
  def.view = [](const std::vector<Tensor>& in, const Attrs& attrs) {
    const Tensor& x = in[0];
    Shape shape;
    Strides strides;
    for (int64_t d : attrs.ints("dims")) {
      shape.push_back(x.shape()[d]);
      strides.push_back(x.strides()[d]);
    }
    return make_alias(x, shape, strides, x.offset());
  };
  def.saves_inputs = false;
  def.grad = [](const GradContext& c) {
    const auto& dims = c.attrs().ints("dims");
    std::vector<int64_t> inverse(dims.size());
    for (size_t j = 0; j < dims.size(); ++j) inverse[dims[j]] = static_cast<int64_t>(j);
    return std::vector<Tensor>{c.grad_output(0).permute(inverse)};
  };
  return def;
}());

// start <= end are clipped into [0, size], so end - start cannot overflow;
// the rounding up is written so that a step near INT64_MAX cannot either.
int64_t slice_length(int64_t start, int64_t end, int64_t step) {
  return end > start ? (end - start - 1) / step + 1 : 0;
}

const OpDef& slice_op = register_op([] {
  OpDef def;
  def.name = "slice";
  def.torch_name = "torch.narrow, basic slicing x[a:b:s]";
  def.signature = "x.slice(dim, start, end, step), x.narrow(dim, start, length)";
  def.infer = [](const MetaVector& in, const Attrs& attrs) {
    // Tensor::slice clips its bounds; a graph (a re-plan evaluating them at
    // a new size) may not have, so they are checked here.
    Shape shape = in[0].shape;
    const int64_t dim = attrs.i("dim"), start = attrs.i("start"), end = attrs.i("end");
    TESSERA_CHECK(dim >= 0 && dim < static_cast<int64_t>(shape.size()), "[slice] dim ", dim,
                  " is out of range for shape ", shape_str(shape));
    const int64_t size = shape[static_cast<size_t>(dim)];
    TESSERA_CHECK(0 <= start && start <= end && end <= size && attrs.i("step") > 0,
                  "[slice] start ", start, ", end ", end, " and step ", attrs.i("step"),
                  " do not fit dim ", dim, " of size ", size,
                  "; need 0 <= start <= end <= size and step > 0");
    shape[static_cast<size_t>(dim)] = slice_length(start, end, attrs.i("step"));
    return MetaVector{{shape, in[0].dtype, in[0].device}};
  };
  def.sbp = [](const MetaVector& in, const Attrs& attrs) {
    std::vector<SbpSignature> signatures;
    for (int64_t d = 0; d < static_cast<int64_t>(in[0].shape.size()); ++d) {
      if (d != attrs.i("dim")) signatures.push_back({{Sbp::split(d)}, {Sbp::split(d)}});
    }
    add_partials(signatures);
    return signatures;
  };
  def.view = [](const std::vector<Tensor>& in, const Attrs& attrs) {
    const Tensor& x = in[0];
    int64_t dim = attrs.i("dim"), start = attrs.i("start"), step = attrs.i("step");
    Shape shape = x.shape();
    Strides strides = x.strides();
    shape[dim] = slice_length(start, attrs.i("end"), step);
    // With at most one element the stride is never used; keeping it avoids a
    // spurious overflow for a huge step.
    if (shape[dim] > 1) strides[dim] = checked_mul(strides[dim], step, "slice");
    int64_t offset =
        shape[dim] == 0
            ? x.offset()
            : checked_add(x.offset(), checked_mul(start, x.strides()[dim], "slice"), "slice");
    return make_alias(x, shape, strides, offset);
  };
  def.saves_inputs = false;
  def.grad = [](const GradContext& c) {
    const Attrs& a = c.attrs();
    return std::vector<Tensor>{slice_backward(c.grad_output(0), c.input_meta(0).shape, a.i("dim"),
                                              a.i("start"), a.i("end"), a.i("step"))};
  };
  return def;
}());

const OpDef& slice_backward_op = register_op([] {
  OpDef def;
  def.name = "slice_backward";
  def.torch_name = "internal";
  def.signature = "slice_backward(grad, input_shape, dim, start, end, step)";
  def.infer = [](const MetaVector& in, const Attrs& attrs) {
    return MetaVector{{attrs.ints("input_shape"), in[0].dtype, in[0].device}};
  };
  def.sbp = [](const MetaVector& in, const Attrs& attrs) {
    std::vector<SbpSignature> signatures;
    for (int64_t d = 0; d < static_cast<int64_t>(in[0].shape.size()); ++d) {
      if (d != attrs.i("dim")) signatures.push_back({{Sbp::split(d)}, {Sbp::split(d)}});
    }
    signatures.push_back({{Sbp::partial_sum()}, {Sbp::partial_sum()}});
    return signatures;
  };
  def.localize = [](const Attrs& attrs, const MetaVector& local, const MetaVector&,
                    const ShardOffsets&) {
    Shape shape = attrs.ints("input_shape");
    for (size_t d = 0; d < shape.size(); ++d) {
      if (static_cast<int64_t>(d) != attrs.i("dim")) shape[d] = local[0].shape[d];
    }
    Attrs result = attrs;
    result.set("input_shape", shape);
    return result;
  };
  def.saves_inputs = false;
  def.grad = [](const GradContext& c) {
    const Attrs& a = c.attrs();
    return std::vector<Tensor>{
        c.grad_output(0).slice(a.i("dim"), a.i("start"), a.i("end"), a.i("step"))};
  };
  return def;
}());

const OpDef& expand_op = register_op([] {
  OpDef def;
  def.name = "expand";
  def.torch_name = "torch.Tensor.expand";
  def.signature = "x.expand(shape)";
  def.infer = [](const MetaVector& in, const Attrs& attrs) {
    return MetaVector{{attrs.ints("shape"), in[0].dtype, in[0].device}};
  };
  def.sbp = [](const MetaVector& in, const Attrs& attrs) {
    const Shape& out = attrs.ints("shape");
    const Shape& shape = in[0].shape;
    int64_t lead = static_cast<int64_t>(out.size() - shape.size());
    std::vector<SbpSignature> signatures;
    for (int64_t d = 0; d < static_cast<int64_t>(shape.size()); ++d) {
      if (shape[d] == out[d + lead])
        signatures.push_back({{Sbp::split(d)}, {Sbp::split(d + lead)}});
    }
    add_partials(signatures);
    return signatures;
  };
  def.localize = [](const Attrs& attrs, const MetaVector& local, const MetaVector& logical,
                    const ShardOffsets&) {
    Shape out = attrs.ints("shape");
    int64_t lead = static_cast<int64_t>(out.size() - local[0].shape.size());
    for (size_t d = 0; d < local[0].shape.size(); ++d) {
      if (local[0].shape[d] != logical[0].shape[d]) out[d + lead] = local[0].shape[d];
    }
    Attrs result = attrs;
    result.set("shape", out);
    return result;
  };
  def.view = [](const std::vector<Tensor>& in, const Attrs& attrs) {
    const Tensor& x = in[0];
    const Shape& shape = attrs.ints("shape");
    int64_t lead = static_cast<int64_t>(shape.size()) - x.dim();
    Strides strides(shape.size(), 0);
    for (int64_t d = 0; d < x.dim(); ++d) {
      strides[d + lead] = x.shape()[d] == shape[d + lead] ? x.strides()[d] : 0;
    }
    return make_alias(x, shape, strides, x.offset());
  };
  def.saves_inputs = false;
  def.grad = [](const GradContext& c) {
    return std::vector<Tensor>{sum_to(c.grad_output(0), c.input_meta(0).shape)};
  };
  return def;
}());

}  // namespace

Tensor slice_backward(const Tensor& grad, const Shape& input_shape, int64_t dim, int64_t start,
                      int64_t end, int64_t step) {
  return call1(slice_backward_op, {grad},
               {{"input_shape", input_shape},
                {"dim", dim},
                {"start", start},
                {"end", end},
                {"step", step}});
}

Tensor Tensor::reshape(const Shape& shape) const {
  Shape resolved = infer_size(shape, numel(), "reshape");
  if (resolved == this->shape()) return *this;
  // A layout the new shape cannot view is copied first, as its own op: a
  // traced graph then holds the copy as a node whose memory the planner
  // places (inside the reshape it would be new memory every run).
  if (!is_global() && !view_strides(this->shape(), strides(), resolved).has_value()) {
    return call1(reshape_op, {copy(*this)}, {{"shape", resolved}});
  }
  return call1(reshape_op, {*this}, {{"shape", resolved}});
}

Tensor Tensor::view(const Shape& shape) const {
  Shape resolved = infer_size(shape, numel(), "view");
  TESSERA_CHECK(view_strides(this->shape(), strides(), resolved).has_value(), "[view] a tensor of shape ",
                shape_str(this->shape()), " with strides ", shape_str(strides()),
                " cannot be viewed as ", shape_str(resolved),
                " without copying; use reshape() or contiguous() first");
  return reshape(resolved);
}

Tensor Tensor::permute(const std::vector<int64_t>& dims) const {
  TESSERA_CHECK(static_cast<int64_t>(dims.size()) == dim(), "[permute] got ", dims.size(),
                " dims for a tensor with ", dim(), " dims (shape ", shape_str(shape()), ")");
  std::vector<int64_t> normalized;
  for (int64_t d : dims) normalized.push_back(normalize_dim(d, dim(), "permute"));
  std::vector<int64_t> sorted = normalized;
  std::sort(sorted.begin(), sorted.end());
  for (int64_t i = 0; i < dim(); ++i) {
    TESSERA_CHECK(sorted[i] == i, "[permute] dims ", shape_str(dims),
                  " must be a permutation of 0..", dim() - 1);
  }
  return call1(permute_op, {*this}, {{"dims", normalized}});
}

Tensor Tensor::transpose(int64_t dim0, int64_t dim1) const {
  int64_t a = normalize_dim(dim0, dim(), "transpose");
  int64_t b = normalize_dim(dim1, dim(), "transpose");
  if (dim() < 2 || a == b) return *this;
  std::vector<int64_t> order(dim());
  std::iota(order.begin(), order.end(), 0);
  std::swap(order[a], order[b]);
  return permute(order);
}

Tensor Tensor::slice(int64_t dim_index, int64_t start, int64_t end, int64_t step) const {
  TESSERA_CHECK(dim() > 0, "[slice] cannot slice a 0-d tensor");
  int64_t d = normalize_dim(dim_index, dim(), "slice");
  TESSERA_CHECK(step > 0, "[slice] step must be positive, got ", step);
  int64_t size = shape()[d];
  auto clip = [size](int64_t index) {
    if (index < 0) index += size;
    return std::clamp<int64_t>(index, 0, size);
  };
  int64_t lo = clip(start), hi = std::max(clip(end), clip(start));
  return call1(slice_op, {*this}, {{"dim", d}, {"start", lo}, {"end", hi}, {"step", step}});
}

Tensor Tensor::narrow(int64_t dim_index, int64_t start, int64_t length) const {
  TESSERA_CHECK(dim() > 0, "[narrow] cannot narrow a 0-d tensor");
  int64_t d = normalize_dim(dim_index, dim(), "narrow");
  int64_t size = shape()[d];
  if (start < 0) start += size;
  TESSERA_CHECK(start >= 0 && start <= size && length >= 0 && length <= size - start,
                "[narrow] start ", start, " and length ", length, " do not fit dim ", d,
                " of size ", size, "; need 0 <= start and start + length <= size");
  return slice(d, start, start + length, 1);
}

Tensor Tensor::select(int64_t dim_index, int64_t index) const {
  TESSERA_CHECK(dim() > 0, "[select] cannot select from a 0-d tensor");
  int64_t d = normalize_dim(dim_index, dim(), "select");
  int64_t size = shape()[d];
  TESSERA_CHECK(index >= -size && index < size, "[select] index ", index,
                " is out of range for dim ", d, " of size ", size);
  if (index < 0) index += size;
  return narrow(d, index, 1).squeeze(d);
}

Tensor Tensor::expand(const Shape& target) const {
  TESSERA_CHECK(target.size() >= shape().size(), "[expand] target ", shape_str(target),
                " has fewer dims than the tensor's shape ", shape_str(shape()));
  Shape resolved = target;
  int64_t lead = static_cast<int64_t>(target.size()) - dim();
  for (int64_t d = 0; d < static_cast<int64_t>(target.size()); ++d) {
    int64_t own = d >= lead ? shape()[d - lead] : 1;
    if (target[d] == -1) {
      TESSERA_CHECK(d >= lead, "[expand] -1 is not allowed for new leading dims");
      resolved[d] = own;
    }
    TESSERA_CHECK(resolved[d] >= 0, "[expand] invalid size ", target[d], " in ", shape_str(target),
                  "; sizes must be >= 0, or -1 to keep a dim");
    TESSERA_CHECK(own == resolved[d] || own == 1, "[expand] cannot expand shape ",
                  shape_str(shape()), " to ", shape_str(target),
                  "; only dims of size 1 can grow");
  }
  checked_numel(resolved, "expand");
  if (resolved == shape()) return *this;
  return call1(expand_op, {*this}, {{"shape", resolved}});
}

Tensor Tensor::squeeze(std::optional<int64_t> dim_index) const {
  Shape shape_out;
  if (dim_index) {
    int64_t d = normalize_dim(*dim_index, dim(), "squeeze");
    if (dim() == 0) return *this;
    shape_out = shape();
    if (shape_out[d] == 1) shape_out.erase(shape_out.begin() + d);
  } else {
    for (int64_t size : shape()) {
      if (size != 1) shape_out.push_back(size);
    }
  }
  return reshape(shape_out);
}

Tensor Tensor::unsqueeze(int64_t dim_index) const {
  int64_t d = normalize_dim(dim_index, dim() + 1, "unsqueeze");
  Shape shape_out = shape();
  shape_out.insert(shape_out.begin() + d, 1);
  return reshape(shape_out);
}

Tensor Tensor::flatten(int64_t start_dim, int64_t end_dim) const {
  int64_t lo = normalize_dim(start_dim, dim(), "flatten");
  int64_t hi = normalize_dim(end_dim, dim(), "flatten");
  if (dim() == 0) return reshape({1});
  TESSERA_CHECK(lo <= hi, "[flatten] start_dim ", start_dim, " comes after end_dim ", end_dim);
  Shape shape_out(shape().begin(), shape().begin() + lo);
  int64_t merged = 1;
  for (int64_t d = lo; d <= hi; ++d) merged = checked_mul(merged, shape()[d], "flatten");
  shape_out.push_back(merged);
  shape_out.insert(shape_out.end(), shape().begin() + hi + 1, shape().end());
  return reshape(shape_out);
}

}  // namespace tessera
