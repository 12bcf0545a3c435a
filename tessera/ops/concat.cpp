// Joining and splitting. cat is the one primitive (kernel:
// backend/cpu/concat.cpp); stack is unsqueeze + cat, and split/chunk are
// narrow views, so gradients flow through them without kernels of their own.

#include "tessera/ops/concat.h"

#include <algorithm>

#include "tessera/ops/op.h"

namespace tessera {

namespace {

const OpDef& cat_op = register_op([] {
  OpDef def;
  def.name = "cat";
  def.kind = OpKind::indexing;
  def.torch_name = "torch.cat";
  def.signature = "cat(tensors, dim), stack(tensors, dim)";
  def.infer = [](const MetaVector& in, const Attrs& attrs) {
    int64_t dim = attrs.i("dim");
    Shape shape = in[0].shape;
    shape[dim] = 0;
    for (const TensorMeta& meta : in) {
      Shape other = meta.shape;
      other[dim] = 0;
      TESSERA_CHECK(other == shape && meta.dtype == in[0].dtype, "[cat] inputs ",
                    shape_str(in[0].shape), " and ", shape_str(meta.shape),
                    " must match in dtype and in every dim but ", dim);
    }
    for (const TensorMeta& meta : in) shape[dim] = checked_add(shape[dim], meta.shape[dim], "cat");
    return MetaVector{{shape, in[0].dtype, in[0].device}};
  };
  def.sbp = [](const MetaVector& in, const Attrs& attrs) {
    std::vector<SbpSignature> signatures;
    for (int64_t d = 0; d < static_cast<int64_t>(in[0].shape.size()); ++d) {
      if (d != attrs.i("dim")) {
        signatures.push_back({std::vector<Sbp>(in.size(), Sbp::split(d)), {Sbp::split(d)}});
      }
    }
    // cat only moves values, so partial values of any kind stay partial.
    for (Sbp partial : {Sbp::partial_sum(), Sbp::partial_max(), Sbp::partial_min()}) {
      signatures.push_back({std::vector<Sbp>(in.size(), partial), {partial}});
    }
    return signatures;
  };
  def.saves_inputs = false;
  def.grad = [](const GradContext& c) {
    int64_t dim = c.attrs().i("dim");
    std::vector<Tensor> grads;
    int64_t start = 0;
    for (int i = 0; i < c.num_inputs(); ++i) {
      int64_t length = c.input_meta(i).shape[dim];
      grads.push_back(c.needs_input_grad(i) ? c.grad_output(0).narrow(dim, start, length)
                                            : Tensor());
      start += length;
    }
    return grads;
  };
  return def;
}());

bool is_legacy_empty(const Tensor& x) {
  return x.dim() == 1 && x.numel() == 0;
}

int64_t checked_split_dim(const Tensor& x, int64_t dim, const char* op) {
  TESSERA_CHECK(x.defined(), "[", op, "] got an undefined tensor");
  TESSERA_CHECK(x.dim() >= 1, "[", op, "] cannot split a 0-d tensor");
  return normalize_dim(dim, x.dim(), op);
}

}  // namespace

Tensor cat(const std::vector<Tensor>& tensors, int64_t dim) {
  TESSERA_CHECK(!tensors.empty(), "[cat] needs at least one tensor");
  for (size_t i = 0; i < tensors.size(); ++i) {
    TESSERA_CHECK(tensors[i].defined(), "[cat] input ", i, " is an undefined tensor");
  }
  // The reference input sets the rank; shape-[0] tensors are skipped when
  // the others are not 1-D (PyTorch's legacy rule).
  DType common = tensors[0].dtype();
  for (const Tensor& t : tensors) common = promote_types(common, t.dtype());
  // Only shape-[0] tensors: PyTorch joins them whatever `dim` is.
  if (std::all_of(tensors.begin(), tensors.end(), is_legacy_empty)) dim = 0;
  size_t reference = 0;
  while (reference + 1 < tensors.size() && is_legacy_empty(tensors[reference])) ++reference;
  const Tensor& first = tensors[reference];
  TESSERA_CHECK(first.dim() >= 1, "[cat] input ", reference,
                " is 0-d; cat needs tensors with at least 1 dim (use stack for scalars)");
  int64_t d = normalize_dim(dim, first.dim(), "cat");

  std::vector<Tensor> inputs;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i];
    if (first.dim() != 1 && is_legacy_empty(t)) continue;
    TESSERA_CHECK(t.dim() == first.dim(), "[cat] input ", i, " has ", t.dim(), " dims (shape ",
                  shape_str(t.shape()), ") but input ", reference, " has ", first.dim(), " (shape ",
                  shape_str(first.shape()), "); all inputs need the same number of dims");
    for (int64_t k = 0; k < t.dim(); ++k) {
      TESSERA_CHECK(k == d || t.shape()[k] == first.shape()[k], "[cat] input ", i, " has shape ",
                    shape_str(t.shape()), " but input ", reference, " has shape ",
                    shape_str(first.shape()), "; sizes must match in every dim except the cat dim ",
                    d, ", and they differ in dim ", k);
    }
    inputs.push_back(t.to(common));
  }
  return call1(cat_op, inputs, {{"dim", d}});
}

Tensor stack(const std::vector<Tensor>& tensors, int64_t dim) {
  TESSERA_CHECK(!tensors.empty(), "[stack] needs at least one tensor");
  for (size_t i = 0; i < tensors.size(); ++i) {
    TESSERA_CHECK(tensors[i].defined(), "[stack] input ", i, " is an undefined tensor");
    TESSERA_CHECK(tensors[i].shape() == tensors[0].shape(), "[stack] input ", i, " has shape ",
                  shape_str(tensors[i].shape()), " but input 0 has shape ",
                  shape_str(tensors[0].shape()), "; stack needs tensors of equal shape");
  }
  int64_t d = normalize_dim(dim, tensors[0].dim() + 1, "stack");
  std::vector<Tensor> expanded;
  for (const Tensor& t : tensors) expanded.push_back(t.unsqueeze(d));
  return cat(expanded, d);
}

std::vector<Tensor> split(const Tensor& x, int64_t split_size, int64_t dim) {
  int64_t d = checked_split_dim(x, dim, "split");
  int64_t size = x.shape()[d];
  TESSERA_CHECK(split_size > 0 || (split_size == 0 && size == 0), "[split] split_size must be ",
                "positive (0 only for an empty dim), got ", split_size, " for dim ", d, " of size ",
                size);
  if (size == 0) return {x.narrow(d, 0, 0)};
  std::vector<Tensor> pieces;
  for (int64_t start = 0; start < size; start += split_size) {
    pieces.push_back(x.narrow(d, start, std::min(split_size, size - start)));
  }
  return pieces;
}

std::vector<Tensor> split(const Tensor& x, const std::vector<int64_t>& sections, int64_t dim) {
  int64_t d = checked_split_dim(x, dim, "split");
  int64_t total = 0;
  for (int64_t section : sections) {
    TESSERA_CHECK(section >= 0, "[split] section sizes must be non-negative, got ",
                  shape_str(sections));
    total = checked_add(total, section, "split");
  }
  TESSERA_CHECK(total == x.shape()[d], "[split] sections ", shape_str(sections), " sum to ", total,
                " but dim ", d, " of shape ", shape_str(x.shape()), " has size ", x.shape()[d]);
  std::vector<Tensor> pieces;
  int64_t start = 0;
  for (int64_t section : sections) {
    pieces.push_back(x.narrow(d, start, section));
    start += section;
  }
  return pieces;
}

std::vector<Tensor> split(const Tensor& x, std::initializer_list<int64_t> sections, int64_t dim) {
  return split(x, std::vector<int64_t>(sections), dim);
}

std::vector<Tensor> chunk(const Tensor& x, int64_t chunks, int64_t dim) {
  int64_t d = checked_split_dim(x, dim, "chunk");
  TESSERA_CHECK(chunks > 0, "[chunk] chunks must be positive, got ", chunks);
  int64_t size = x.shape()[d];
  if (size == 0) return std::vector<Tensor>(chunks, x.narrow(d, 0, 0));
  return split(x, (size + chunks - 1) / chunks, d);
}

}  // namespace tessera
