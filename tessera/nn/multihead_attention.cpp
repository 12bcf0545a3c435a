#include "tessera/nn/multihead_attention.h"

#include <cmath>
#include <sstream>

#include "tessera/core/grad_mode.h"
#include "tessera/nn/init.h"
#include "tessera/nn/linear.h"
#include "tessera/ops/concat.h"
#include "tessera/ops/creation.h"
#include "tessera/ops/dropout.h"
#include "tessera/ops/elementwise.h"
#include "tessera/ops/matmul.h"
#include "tessera/ops/softmax.h"
#include "tessera/ops/triangle.h"

namespace tessera::nn {

Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                    const Tensor& attn_mask, double dropout_p, bool is_causal) {
  TESSERA_CHECK(q.dim() >= 2 && k.dim() == q.dim() && v.dim() == q.dim(),
                "[scaled_dot_product_attention] q, k and v need the same rank >= 2, got ",
                shape_str(q.shape()), ", ", shape_str(k.shape()), ", ", shape_str(v.shape()));
  const int64_t head_dim = q.size(-1);
  const int64_t target_len = q.size(-2);
  const int64_t source_len = k.size(-2);
  TESSERA_CHECK(k.size(-1) == head_dim && v.size(-2) == source_len,
                "[scaled_dot_product_attention] k must be [..., S, ", head_dim,
                "] and v [..., S, Dv]; got q ", shape_str(q.shape()), ", k ", shape_str(k.shape()),
                ", v ", shape_str(v.shape()));
  Tensor scores = matmul(mul(q, 1.0 / std::sqrt(static_cast<double>(head_dim))),
                         k.transpose(-2, -1));
  if (is_causal) {
    TESSERA_CHECK(!attn_mask.defined(),
                  "[scaled_dot_product_attention] give either attn_mask or is_causal, not both");
    // On global scores the mask is a broadcast global tensor (built locally, no traffic).
    Tensor all = scores.is_global() ? ones({target_len, source_len}, scores.placement(),
                                           NdSbp::broadcast(scores.placement().ndim()),
                                           DType::boolean)
                                    : ones({target_len, source_len}, DType::boolean);
    Tensor future = triu(all, 1);
    scores = masked_fill(scores, future, -INFINITY);
  } else if (attn_mask.defined()) {
    if (attn_mask.dtype() == DType::boolean) {
      scores = masked_fill(scores, attn_mask, -INFINITY);
    } else {
      scores = add(scores, attn_mask);
    }
  }
  Tensor weights = softmax(scores, -1);
  if (dropout_p > 0.0) weights = dropout(weights, dropout_p, true);
  return matmul(weights, v);
}

MultiheadAttention::MultiheadAttention(int64_t embed_dim, int64_t num_heads, double dropout,
                                       bool bias, bool batch_first)
    : Module("MultiheadAttention"),
      embed_dim_(embed_dim),
      num_heads_(num_heads),
      dropout_(dropout),
      batch_first_(batch_first) {
  TESSERA_CHECK(embed_dim > 0 && num_heads > 0 && embed_dim % num_heads == 0,
                "[MultiheadAttention] embed_dim (", embed_dim,
                ") must be positive and divisible by num_heads (", num_heads, ")");
  TESSERA_CHECK(dropout >= 0.0 && dropout < 1.0, "[MultiheadAttention] dropout must be in [0, 1), got ",
                dropout);
  in_proj_weight = register_parameter("in_proj_weight", Tensor::empty({3 * embed_dim, embed_dim}));
  xavier_uniform_(in_proj_weight);
  if (bias) in_proj_bias = register_parameter("in_proj_bias", zeros({3 * embed_dim}));
  out_proj = register_module("out_proj", std::make_shared<Linear>(embed_dim, embed_dim, bias));
  if (bias) {
    NoGradGuard no_grad;
    out_proj->bias.zero_();
  }
}

Tensor MultiheadAttention::forward(const Tensor& query, const Tensor& key, const Tensor& value,
                                   const Tensor& attn_mask, bool is_causal) {
  TESSERA_CHECK(query.dim() == 3 && key.dim() == 3 && value.dim() == 3,
                "[MultiheadAttention] query, key and value must be 3-D (",
                batch_first_ ? "[B, T, E]" : "[T, B, E]", "), got ", shape_str(query.shape()), ", ",
                shape_str(key.shape()), ", ", shape_str(value.shape()));
  TESSERA_CHECK(query.size(2) == embed_dim_ && key.size(2) == embed_dim_ &&
                    value.size(2) == embed_dim_,
                "[MultiheadAttention] the last dim of query, key and value must be embed_dim=",
                embed_dim_, ", got ", shape_str(query.shape()), ", ", shape_str(key.shape()), ", ",
                shape_str(value.shape()));
  // Work batch-first: [B, T, E].
  Tensor q_in = batch_first_ ? query : query.transpose(0, 1);
  Tensor k_in = batch_first_ ? key : key.transpose(0, 1);
  Tensor v_in = batch_first_ ? value : value.transpose(0, 1);
  const int64_t batch = q_in.size(0);
  TESSERA_CHECK(k_in.size(0) == batch && v_in.size(0) == batch && k_in.size(1) == v_in.size(1),
                "[MultiheadAttention] batch sizes and key/value lengths must agree, got query ",
                shape_str(query.shape()), ", key ", shape_str(key.shape()), ", value ",
                shape_str(value.shape()));

  auto project = [&](const Tensor& x, const Tensor& weight, const Tensor& bias) {
    Tensor out = matmul(x, weight.t());
    return bias.defined() ? add(out, bias) : out;
  };
  Tensor q, k, v;
  if (query.is_same(key) && key.is_same(value)) {
    // Self-attention: one product for q, k and v.
    std::vector<Tensor> qkv = chunk(project(q_in, in_proj_weight, in_proj_bias), 3, -1);
    q = qkv[0], k = qkv[1], v = qkv[2];
  } else {
    std::vector<Tensor> weights = chunk(in_proj_weight, 3, 0);
    std::vector<Tensor> biases;
    if (in_proj_bias.defined()) biases = chunk(in_proj_bias, 3, 0);
    auto bias_at = [&](int i) { return biases.empty() ? Tensor() : biases[i]; };
    q = project(q_in, weights[0], bias_at(0));
    k = project(k_in, weights[1], bias_at(1));
    v = project(v_in, weights[2], bias_at(2));
  }
  const int64_t head_dim = embed_dim_ / num_heads_;
  auto split_heads = [&](const Tensor& t) {  // [B, L, E] -> [B, H, L, D]
    return t.reshape({batch, t.size(1), num_heads_, head_dim}).permute({0, 2, 1, 3});
  };
  Tensor mask = attn_mask;
  if (mask.defined() && mask.dim() == 3) {  // [B*H, T, S] -> [B, H, T, S]
    mask = mask.reshape({batch, num_heads_, mask.size(1), mask.size(2)});
  }
  Tensor heads = scaled_dot_product_attention(split_heads(q), split_heads(k), split_heads(v), mask,
                                              is_training() ? dropout_ : 0.0, is_causal);
  Tensor merged = heads.permute({0, 2, 1, 3}).reshape({batch, q_in.size(1), embed_dim_});
  Tensor out = (*out_proj)(merged);
  return batch_first_ ? out : out.transpose(0, 1);
}

std::string MultiheadAttention::extra_repr() const {
  std::ostringstream os;
  os << "embed_dim=" << embed_dim_ << ", num_heads=" << num_heads_ << ", dropout=" << dropout_
     << ", batch_first=" << (batch_first_ ? "true" : "false");
  return os.str();
}

}  // namespace tessera::nn
