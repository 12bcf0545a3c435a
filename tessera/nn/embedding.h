#pragma once

#include <optional>

#include "tessera/nn/module.h"

namespace tessera::nn {

// A lookup table: integer indices of any shape -> rows of weight
// [num_embeddings, embedding_dim] (initialised N(0, 1), as PyTorch). The row
// at padding_idx starts at zero and receives no gradient.
class Embedding : public Module {
 public:
  Embedding(int64_t num_embeddings, int64_t embedding_dim,
            std::optional<int64_t> padding_idx = std::nullopt);
  Tensor forward(const Tensor& indices) override;
  std::string extra_repr() const override;

  Tensor weight;

 private:
  int64_t num_embeddings_;
  int64_t embedding_dim_;
  std::optional<int64_t> padding_idx_;
};

}  // namespace tessera::nn
