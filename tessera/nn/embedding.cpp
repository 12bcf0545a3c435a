#include "tessera/nn/embedding.h"

#include "tessera/core/grad_mode.h"
#include "tessera/nn/init.h"
#include "tessera/ops/index.h"

namespace tessera::nn {

Embedding::Embedding(int64_t num_embeddings, int64_t embedding_dim,
                     std::optional<int64_t> padding_idx)
    : Module("Embedding"),
      num_embeddings_(num_embeddings),
      embedding_dim_(embedding_dim),
      padding_idx_(padding_idx) {
  TESSERA_CHECK(num_embeddings > 0 && embedding_dim > 0,
                "[Embedding] num_embeddings and embedding_dim must be positive, got ",
                num_embeddings, " and ", embedding_dim);
  if (padding_idx_ && *padding_idx_ < 0) *padding_idx_ += num_embeddings;
  TESSERA_CHECK(!padding_idx_ || (*padding_idx_ >= 0 && *padding_idx_ < num_embeddings),
                "[Embedding] padding_idx must be in [-", num_embeddings, ", ", num_embeddings,
                "), got ", padding_idx.value_or(0));
  weight = register_parameter("weight", Tensor::empty({num_embeddings, embedding_dim}));
  normal_(weight);
  if (padding_idx_) {
    NoGradGuard no_grad;
    Tensor row = weight.select(0, *padding_idx_);
    row.zero_();
  }
}

Tensor Embedding::forward(const Tensor& indices) { return embedding(weight, indices, padding_idx_); }

std::string Embedding::extra_repr() const {
  std::string text = str_cat(num_embeddings_, ", ", embedding_dim_);
  if (padding_idx_) text += str_cat(", padding_idx=", *padding_idx_);
  return text;
}

}  // namespace tessera::nn
