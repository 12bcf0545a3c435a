#pragma once

#include <memory>

#include "tessera/nn/module.h"

namespace tessera::nn {

class Linear;

// Multi-head scaled dot-product attention with PyTorch's parameter layout
// (in_proj_weight [3E, E], in_proj_bias [3E], out_proj), so state dicts of
// torch.nn.MultiheadAttention load unchanged. Inputs are [T, B, E], or
// [B, T, E] with batch_first. Masks: `attn_mask` is a bool [T, S] tensor
// where true means "may not attend", or a float [T, S] (or [B*H, T, S])
// tensor added to the scores; `is_causal` masks future positions.
class MultiheadAttention : public Module {
 public:
  MultiheadAttention(int64_t embed_dim, int64_t num_heads, double dropout = 0.0,
                     bool bias = true, bool batch_first = false);

  Tensor forward(const Tensor& query, const Tensor& key, const Tensor& value,
                 const Tensor& attn_mask = {}, bool is_causal = false);
  // Self-attention without a mask.
  Tensor forward(const Tensor& x) override { return forward(x, x, x); }
  Tensor operator()(const Tensor& query, const Tensor& key, const Tensor& value,
                    const Tensor& attn_mask = {}, bool is_causal = false) {
    return forward(query, key, value, attn_mask, is_causal);
  }
  using Module::operator();

  std::string extra_repr() const override;

  int64_t embed_dim() const { return embed_dim_; }
  int64_t num_heads() const { return num_heads_; }

  Tensor in_proj_weight;
  Tensor in_proj_bias;
  std::shared_ptr<Linear> out_proj;

 private:
  int64_t embed_dim_;
  int64_t num_heads_;
  double dropout_;
  bool batch_first_;
};

// Attention of already projected heads: q [B, H, T, D], k and v [B, H, S, D].
// Scores are scaled by 1/sqrt(D); masks as in MultiheadAttention.
Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                    const Tensor& attn_mask = {}, double dropout_p = 0.0,
                                    bool is_causal = false);

}  // namespace tessera::nn
