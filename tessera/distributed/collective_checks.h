#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "tessera/core/tensor.h"

// Input validation shared by the Group backends. Messages start with
// "[op]" and name the calling rank ("rank r of n").
namespace tessera::distributed {

static_assert(kNumDTypes == 8, "a new dtype: add it to kMoveDTypes");

// Dtypes a reduction accepts, and those that are only moved (as bytes:
// every dtype).
inline const std::vector<DType> kReduceDTypes = {DType::f32, DType::f64, DType::i64, DType::i32};
inline const std::vector<DType> kMoveDTypes = {DType::f32, DType::f64, DType::bf16, DType::f16,
                                               DType::i64, DType::i32, DType::u8,   DType::boolean};

// Throws unless `tensor` is defined, on the CPU (or on cuda:cuda_device when
// that is >= 0: the NCCL backend's device), contiguous and of an allowed dtype.
void check_tensor(const char* op, const Tensor& tensor, const std::vector<DType>& allowed,
                  const std::string& where, int cuda_device = -1);
// Throws unless 0 <= peer < size (and peer != rank unless allow_self).
void check_peer(const char* op, int peer, int size, bool allow_self, int rank,
                const std::string& where);
// Where each rank's dim-0 rows land when every rank's rows are gathered
// into one tensor (a 0-d tensor counts as one row).
struct GatheredRows {
  std::vector<int64_t> rows;   // per rank
  std::vector<int64_t> first;  // per rank: its first row in the gathered tensor
  int64_t total = 0;
  explicit GatheredRows(std::vector<int64_t> per_rank);
  // The gathered tensor's shape: `shape` with dim 0 the total ([ranks] for 0-d).
  Shape shape_of(const Shape& shape) const;
  // Each rank's rows of `gathered` (gathered tensors of `shape`) as views;
  // plain views, so they work on any device.
  std::vector<Tensor> pieces(const Tensor& gathered, const Shape& shape) const;
};

// Checks a split's member list (ranks of a group of `size`, each once, this
// `rank` among them) and returns this rank's position in it.
int check_split(const std::vector<int>& ranks, int size, int rank, const std::string& where);
// "[0, 2, 3]" for messages and store keys.
std::string ranks_str(const std::vector<int>& ranks);
// One tensor per rank, all of one dtype and trailing shape (or one shape when
// same_shape), each passing check_tensor.
void check_per_rank(const char* op, const std::vector<Tensor>& inputs, int size,
                    const std::vector<DType>& allowed, bool same_shape, const std::string& where,
                    int cuda_device = -1);

// What ranks exchange before moving bytes, so mismatches raise instead of
// corrupting. Real dims travel (up to kMaxDims; any beyond fold into a hash),
// so messages show each rank's actual shape.
struct Layout {
  static constexpr size_t kMaxDims = 8;
  static constexpr size_t kFields = 5 + kMaxDims;
  int64_t dtype = 0;
  int64_t ndim = 0;
  int64_t numel = 0;
  int64_t row_bytes = 0;   // bytes per dim-0 slice (all bytes for a 0-d tensor)
  int64_t extra_hash = 0;  // hash of dims past kMaxDims (0 when there are none)
  std::array<int64_t, kMaxDims> dims{};

  // Dim 0 (1 for a 0-d tensor).
  int64_t rows() const { return ndim == 0 ? 1 : dims[0]; }
  // "f32 [2, 3]" for messages.
  std::string str() const;
  // kFields integers.
  std::vector<int64_t> encode() const;
  // Reads rank `peer`'s layout from gathered records of `stride` integers.
  static Layout decode(const std::vector<int64_t>& all, int peer, size_t stride = kFields);
  // Reads one record of kFields integers.
  static Layout decode(const int64_t* record);
  // A 64-bit hash of every field; equal layouts give equal fingerprints.
  uint64_t fingerprint() const;
  // Every field equal.
  bool operator==(const Layout& other) const = default;
};

// The layout of a contiguous tensor.
Layout layout_of(const Tensor& tensor);
// Throws unless `theirs` (from rank `peer`) matches `mine` in dtype and
// trailing shape, and in every dim when equal_shapes. `hint` ends the message
// (what would be valid); empty gives the default for the rule.
void check_compatible(const char* op, const Layout& mine, int rank, const Layout& theirs, int peer,
                      bool equal_shapes, const std::string& where, const std::string& hint = "");
// Throws unless `theirs` has the dtype and element count of `mine` (send/recv).
void check_same_size(const char* op, const Layout& mine, int rank, const Layout& theirs, int peer,
                     const std::string& where);

}  // namespace tessera::distributed
