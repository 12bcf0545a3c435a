#pragma once

// Binary search into sorted sequences: searchsorted and bucketize, as in
// PyTorch. Outputs are indices (no gradient).

#include <optional>
#include <string>

#include "tessera/core/tensor.h"

namespace tessera {

// For each value, the index where it would be inserted into the innermost
// dim of sorted_sequence to keep it sorted (torch.searchsorted): the first
// index whose element is >= the value, or > it with right = true (or
// side = "right"). sorted_sequence is 1-D, or has values' leading dims.
// sorter, when given, holds the indices that sort sorted_sequence's
// innermost dim. The result is i64, or i32 with out_int32.
Tensor searchsorted(const Tensor& sorted_sequence, const Tensor& values, bool out_int32 = false,
                    bool right = false, const std::optional<std::string>& side = std::nullopt,
                    const Tensor& sorter = Tensor());
// The bucket of each element of x among 1-D boundaries (torch.bucketize):
// searchsorted(boundaries, x, out_int32, right).
Tensor bucketize(const Tensor& x, const Tensor& boundaries, bool out_int32 = false,
                 bool right = false);


}  // namespace tessera
