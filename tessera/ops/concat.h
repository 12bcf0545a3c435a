#pragma once

// Joining (cat, stack) and splitting (split, chunk). The splits return views
// that share storage with their input.

#include <initializer_list>
#include <vector>

#include "tessera/core/tensor.h"

namespace tessera {

// Joins tensors along an existing dim; inputs are promoted to a common dtype and must
// match in every other dim (1-D empty tensors are skipped, as in PyTorch).
Tensor cat(const std::vector<Tensor>& tensors, int64_t dim = 0);
// Joins equal-shaped tensors along a new dim inserted at `dim`.
Tensor stack(const std::vector<Tensor>& tensors, int64_t dim = 0);
// Views of consecutive pieces of split_size along dim (the last one may be shorter).
std::vector<Tensor> split(const Tensor& x, int64_t split_size, int64_t dim = 0);
// Views of pieces with the given sizes along dim; they must sum to x.size(dim).
std::vector<Tensor> split(const Tensor& x, const std::vector<int64_t>& sections, int64_t dim = 0);
// As above; makes split(x, {2}) mean one section of 2 rather than pieces of 2.
std::vector<Tensor> split(const Tensor& x, std::initializer_list<int64_t> sections,
                          int64_t dim = 0);
// Views of ceil(size / chunks) along dim, as torch.chunk (may return fewer than chunks).
std::vector<Tensor> chunk(const Tensor& x, int64_t chunks, int64_t dim = 0);

}  // namespace tessera
