#include "tessera/nn/transformer_block.h"

#include <sstream>

#include "tessera/nn/dropout.h"
#include "tessera/nn/layer_norm.h"
#include "tessera/nn/linear.h"
#include "tessera/nn/multihead_attention.h"
#include "tessera/ops/elementwise.h"

namespace tessera::nn {

TransformerBlock::TransformerBlock(int64_t d_model, int64_t nhead, int64_t dim_feedforward,
                                   double dropout_p, bool causal, const std::string& activation,
                                   double layer_norm_eps)
    : Module("TransformerBlock"), causal_(causal), activation_(activation) {
  TESSERA_CHECK(activation == "gelu" || activation == "relu",
                "[TransformerBlock] activation must be \"gelu\" or \"relu\", got \"", activation,
                "\"");
  const int64_t hidden = dim_feedforward > 0 ? dim_feedforward : 4 * d_model;
  self_attn = register_module(
      "self_attn", std::make_shared<MultiheadAttention>(d_model, nhead, dropout_p, true, true));
  linear1 = register_module("linear1", std::make_shared<Linear>(d_model, hidden));
  dropout = register_module("dropout", std::make_shared<Dropout>(dropout_p));
  linear2 = register_module("linear2", std::make_shared<Linear>(hidden, d_model));
  norm1 = register_module("norm1", std::make_shared<LayerNorm>(Shape{d_model}, layer_norm_eps));
  norm2 = register_module("norm2", std::make_shared<LayerNorm>(Shape{d_model}, layer_norm_eps));
  dropout1 = register_module("dropout1", std::make_shared<Dropout>(dropout_p));
  dropout2 = register_module("dropout2", std::make_shared<Dropout>(dropout_p));
}

Tensor TransformerBlock::forward(const Tensor& x) {
  Tensor h = (*norm1)(x);
  Tensor out = add(x, (*dropout1)(self_attn->forward(h, h, h, {}, causal_)));
  Tensor hidden = (*linear1)((*norm2)(out));
  hidden = activation_ == "gelu" ? gelu(hidden) : relu(hidden);
  return add(out, (*dropout2)((*linear2)((*dropout)(hidden))));
}

std::string TransformerBlock::extra_repr() const {
  std::ostringstream os;
  os << "causal=" << (causal_ ? "true" : "false") << ", activation=" << activation_;
  return os.str();
}

}  // namespace tessera::nn
