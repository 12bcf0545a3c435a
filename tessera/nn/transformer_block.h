#pragma once

#include <memory>
#include <string>

#include "tessera/nn/module.h"

namespace tessera::nn {

class Dropout;
class LayerNorm;
class Linear;
class MultiheadAttention;

// A pre-norm transformer block on [B, T, E] inputs:
//   x = x + dropout(attention(norm1(x)))
//   x = x + dropout(linear2(dropout(activation(linear1(norm2(x))))))
// Its submodules carry the names of torch.nn.TransformerEncoderLayer(
// norm_first=True, batch_first=True), so that layer's state dict loads here.
// `causal` masks future positions (a GPT block).
class TransformerBlock : public Module {
 public:
  TransformerBlock(int64_t d_model, int64_t nhead, int64_t dim_feedforward = 0,
                   double dropout = 0.0, bool causal = false,
                   const std::string& activation = "gelu", double layer_norm_eps = 1e-5);

  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;

  std::shared_ptr<MultiheadAttention> self_attn;
  std::shared_ptr<Linear> linear1;
  std::shared_ptr<Dropout> dropout;
  std::shared_ptr<Linear> linear2;
  std::shared_ptr<LayerNorm> norm1;
  std::shared_ptr<LayerNorm> norm2;
  std::shared_ptr<Dropout> dropout1;
  std::shared_ptr<Dropout> dropout2;

 private:
  bool causal_;
  std::string activation_;
};

}  // namespace tessera::nn
