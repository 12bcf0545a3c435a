#include "tessera/distributed/collective_checks.h"

#include <set>
#include <utility>

#include "tessera/core/error.h"

namespace tessera::distributed {
namespace {

std::string dtype_list(const std::vector<DType>& dtypes) {
  std::string text;
  for (DType dtype : dtypes) text += (text.empty() ? "" : ", ") + std::string(dtype_name(dtype));
  return text;
}

}  // namespace

void check_tensor(const char* op, const Tensor& tensor, const std::vector<DType>& allowed,
                  const std::string& where, int cuda_device) {
  TESSERA_CHECK(tensor.defined(), "[", op, "] ", where, ": the tensor is undefined");
  if (cuda_device < 0) {
    TESSERA_CHECK(tensor.device().type == DeviceType::cpu, "[", op, "] ", where,
                  ": needs a CPU tensor, got ", device_str(tensor.device()),
                  " (the Gloo and MPI backends move CPU memory; use the nccl backend for CUDA "
                  "tensors)");
  } else {
    const Device group_device{DeviceType::cuda, cuda_device};
    TESSERA_CHECK(tensor.device().type == DeviceType::cpu || tensor.device() == group_device, "[",
                  op, "] ", where, ": needs a tensor on ", device_str(group_device),
                  " (the group's device) or the CPU, got ", device_str(tensor.device()));
  }
  TESSERA_CHECK(tensor.is_contiguous(), "[", op, "] ", where, ": needs a contiguous tensor, got ",
                shape_str(tensor.shape()), " with strides ", shape_str(tensor.strides()),
                "; call .contiguous() first");
  bool ok = false;
  for (DType dtype : allowed) ok = ok || dtype == tensor.dtype();
  TESSERA_CHECK(ok, "[", op, "] ", where, ": dtype ", dtype_name(tensor.dtype()), " of ",
                shape_str(tensor.shape()), " is not supported; valid: ", dtype_list(allowed));
}

void check_peer(const char* op, int peer, int size, bool allow_self, int rank,
                const std::string& where) {
  TESSERA_CHECK(peer >= 0 && peer < size, "[", op, "] ", where, ": rank ", peer, " is outside [0, ",
                size, ")");
  TESSERA_CHECK(allow_self || peer != rank, "[", op, "] ", where,
                ": cannot send to or receive from itself (peer ", peer, ")");
}

void check_per_rank(const char* op, const std::vector<Tensor>& inputs, int size,
                    const std::vector<DType>& allowed, bool same_shape, const std::string& where,
                    int cuda_device) {
  TESSERA_CHECK(static_cast<int>(inputs.size()) == size, "[", op, "] ", where, ": got ",
                inputs.size(), " tensors; needs one per rank (", size, ")");
  for (size_t i = 0; i < inputs.size(); ++i) {
    check_tensor(op, inputs[i], allowed, where, cuda_device);
    TESSERA_CHECK(inputs[i].dim() >= 1, "[", op, "] ", where, ": inputs[", i,
                  "] is 0-d; needs at least one dimension");
    const Tensor& first = inputs[0];
    bool match = inputs[i].dtype() == first.dtype() && inputs[i].dim() == first.dim();
    for (int64_t d = same_shape ? 0 : 1; match && d < first.dim(); ++d) {
      match = inputs[i].size(d) == first.size(d);
    }
    TESSERA_CHECK(match, "[", op, "] ", where, ": inputs[", i, "] is ",
                  dtype_name(inputs[i].dtype()), " ", shape_str(inputs[i].shape()),
                  " but inputs[0] is ", dtype_name(first.dtype()), " ", shape_str(first.shape()),
                  same_shape ? "; all must have one shape and dtype"
                             : "; all must share dtype and dims after the first");
  }
}

std::string Layout::str() const {
  std::string text = dtype_name(static_cast<DType>(dtype));
  text += " [";
  for (int64_t d = 0; d < ndim; ++d) {
    if (d > 0) text += ", ";
    text += d < static_cast<int64_t>(kMaxDims) ? std::to_string(dims[d]) : std::string("...");
    if (d >= static_cast<int64_t>(kMaxDims)) break;
  }
  return text + "]";
}

std::vector<int64_t> Layout::encode() const {
  std::vector<int64_t> out = {dtype, ndim, numel, row_bytes, extra_hash};
  out.insert(out.end(), dims.begin(), dims.end());
  return out;
}

Layout Layout::decode(const std::vector<int64_t>& all, int peer, size_t stride) {
  return decode(all.data() + static_cast<size_t>(peer) * stride);
}

Layout Layout::decode(const int64_t* p) {
  Layout layout{p[0], p[1], p[2], p[3], p[4], {}};
  for (size_t d = 0; d < kMaxDims; ++d) layout.dims[d] = p[5 + d];
  return layout;
}

uint64_t Layout::fingerprint() const {
  uint64_t hash = 1469598103934665603ull;  // FNV-1a over the encoded fields
  for (int64_t field : encode()) {
    for (int byte = 0; byte < 8; ++byte) {
      hash = (hash ^ ((static_cast<uint64_t>(field) >> (8 * byte)) & 0xff)) * 1099511628211ull;
    }
  }
  return hash;
}

Layout layout_of(const Tensor& tensor) {
  Layout layout;
  layout.dtype = static_cast<int64_t>(tensor.dtype());
  layout.ndim = tensor.dim();
  layout.numel = tensor.numel();
  int64_t row = 1;
  uint64_t hash = 0;
  for (int64_t d = 0; d < tensor.dim(); ++d) {
    if (d > 0) row *= tensor.size(d);
    if (d < static_cast<int64_t>(Layout::kMaxDims)) {
      layout.dims[static_cast<size_t>(d)] = tensor.size(d);
    } else {
      hash = (hash ^ static_cast<uint64_t>(tensor.size(d))) * 1099511628211ull + 1;
    }
  }
  layout.row_bytes = row * static_cast<int64_t>(dtype_size(tensor.dtype()));
  layout.extra_hash = static_cast<int64_t>(hash);
  return layout;
}

void check_compatible(const char* op, const Layout& mine, int rank, const Layout& theirs, int peer,
                      const bool equal_shapes, const std::string& where, const std::string& hint) {
  bool match = mine.dtype == theirs.dtype && mine.ndim == theirs.ndim &&
               mine.row_bytes == theirs.row_bytes && mine.extra_hash == theirs.extra_hash;
  for (size_t d = equal_shapes ? 0 : 1; match && d < Layout::kMaxDims; ++d) {
    match = mine.dims[d] == theirs.dims[d];
  }
  const std::string rule = !hint.empty()  ? hint
                           : equal_shapes ? "every rank needs the same dtype and shape"
                                          : "ranks may differ only in dim 0";
  TESSERA_CHECK(match, "[", op, "] ", where, ": rank ", rank, " has ", mine.str(), " but rank ",
                peer, " has ", theirs.str(), "; ", rule);
}

void check_same_size(const char* op, const Layout& mine, int rank, const Layout& theirs, int peer,
                     const std::string& where) {
  TESSERA_CHECK(mine.dtype == theirs.dtype && mine.numel == theirs.numel, "[", op, "] ", where,
                ": rank ", rank, " has ", mine.str(), " (", mine.numel, " elements) but rank ",
                peer, " has ", theirs.str(), " (", theirs.numel,
                " elements); send and recv need the same dtype and element count");
}

int check_split(const std::vector<int>& ranks, int size, int rank, const std::string& where) {
  std::set<int> seen;
  int position = -1;
  for (size_t i = 0; i < ranks.size(); ++i) {
    check_peer("split", ranks[i], size, true, rank, where);
    TESSERA_CHECK(seen.insert(ranks[i]).second, "[split] ", where, ": rank ", ranks[i],
                  " is listed twice");
    if (ranks[i] == rank) position = static_cast<int>(i);
  }
  TESSERA_CHECK(position >= 0, "[split] ", where, ": this rank is not in the list ",
                ranks_str(ranks), "; only members call split");
  return position;
}

std::string ranks_str(const std::vector<int>& ranks) {
  return shape_str(std::vector<int64_t>(ranks.begin(), ranks.end()));
}

GatheredRows::GatheredRows(std::vector<int64_t> per_rank)
    : rows(std::move(per_rank)), first(rows.size()) {
  for (size_t peer = 0; peer < rows.size(); ++peer) {
    first[peer] = total;
    total += rows[peer];
  }
}

Shape GatheredRows::shape_of(const Shape& shape) const {
  if (shape.empty()) return {static_cast<int64_t>(rows.size())};
  Shape gathered = shape;
  gathered[0] = total;
  return gathered;
}

std::vector<Tensor> GatheredRows::pieces(const Tensor& gathered, const Shape& shape) const {
  int64_t row_elements = 1;  // one value per rank for a 0-d shape
  for (size_t d = 1; d < shape.size(); ++d) row_elements *= shape[d];
  std::vector<Tensor> out;
  for (size_t peer = 0; peer < rows.size(); ++peer) {
    Shape piece = shape;
    if (!piece.empty()) piece[0] = rows[peer];
    out.push_back(make_alias(gathered, piece, contiguous_strides(piece), first[peer] * row_elements));
  }
  return out;
}

}  // namespace tessera::distributed
