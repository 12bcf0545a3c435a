#pragma once

// A decoder-only transformer (GPT) built from Tessera's nn layers: token and
// position embeddings, `layers` causal pre-norm TransformerBlocks, a final
// LayerNorm and a linear head. Submodule names follow the PyTorch twin in
// bench/train_torch.py so state dicts move between the two.

#include <algorithm>
#include <cmath>
#include <memory>
#include <vector>

#include "tessera/tessera.h"

namespace tessera::models {

struct GPTConfig {
  int64_t vocab_size = 256;
  int64_t context = 128;
  int64_t d_model = 256;
  int64_t heads = 4;
  int64_t layers = 4;
  double dropout = 0.0;
};

class GPT : public nn::Module {
 public:
  explicit GPT(const GPTConfig& config) : Module("GPT"), config_(config) {
    token = register_module("token",
                            std::make_shared<nn::Embedding>(config.vocab_size, config.d_model));
    position =
        register_module("position", std::make_shared<nn::Embedding>(config.context, config.d_model));
    blocks = register_module("blocks", std::make_shared<nn::ModuleList>());
    for (int64_t i = 0; i < config.layers; ++i) {
      blocks->push_back(std::make_shared<nn::TransformerBlock>(
          config.d_model, config.heads, 4 * config.d_model, config.dropout, /*causal=*/true));
    }
    norm = register_module("norm", std::make_shared<nn::LayerNorm>(Shape{config.d_model}));
    head = register_module("head", std::make_shared<nn::Linear>(config.d_model, config.vocab_size));
  }

  // tokens: i64 [B, T] with T <= context. Returns logits [B, T, vocab].
  Tensor forward(const Tensor& tokens) override {
    TESSERA_CHECK(tokens.dim() == 2 && tokens.size(1) <= config_.context,
                  "[GPT] tokens must be [B, T] with T <= ", config_.context, ", got ",
                  shape_str(tokens.shape()));
    Tensor positions = arange(tokens.size(1));
    if (tokens.is_global()) {
      positions = positions.to_global(tokens.placement(),
                                      NdSbp::broadcast(tokens.placement().ndim()));
    }
    Tensor h = add((*token)(tokens), (*position)(positions));
    for (const auto& block : *blocks) h = block->forward(h);
    return (*head)((*norm)(h));
  }

  // Samples `count` tokens after `prompt` (i64 [T]), one at a time, from the
  // softmax of the last logits at `temperature`, keeping the `top_k` most
  // likely tokens (0: all).
  std::vector<int64_t> generate(std::vector<int64_t> prompt, int64_t count,
                                double temperature = 1.0, int64_t top_k = 0,
                                Generator* generator = nullptr) {
    NoGradGuard no_grad;
    for (int64_t i = 0; i < count; ++i) {
      const int64_t start =
          std::max<int64_t>(0, static_cast<int64_t>(prompt.size()) - config_.context);
      std::vector<int64_t> window(prompt.begin() + start, prompt.end());
      Tensor input =
          Tensor::from_vector(window, {1, static_cast<int64_t>(window.size())});
      Tensor logits = forward(input).select(1, input.size(1) - 1).select(0, 0);
      std::vector<float> scores = div(logits, temperature).to_vector<float>();
      if (top_k > 0 && top_k < static_cast<int64_t>(scores.size())) {
        std::vector<float> sorted = scores;
        std::nth_element(sorted.begin(), sorted.begin() + (top_k - 1), sorted.end(),
                         std::greater<float>());
        const float cutoff = sorted[top_k - 1];
        for (float& s : scores) {
          if (s < cutoff) s = -INFINITY;
        }
      }
      std::vector<float> probs =
          softmax(Tensor::from_vector(scores, {static_cast<int64_t>(scores.size())}), 0)
              .to_vector<float>();
      const float u = rand({1}, DType::f32, generator).item<float>();
      float total = 0.0f;
      int64_t choice = static_cast<int64_t>(probs.size()) - 1;
      for (size_t j = 0; j < probs.size(); ++j) {
        total += probs[j];
        if (u < total) {
          choice = static_cast<int64_t>(j);
          break;
        }
      }
      prompt.push_back(choice);
    }
    return prompt;
  }

  const GPTConfig& config() const { return config_; }

  std::shared_ptr<nn::Embedding> token;
  std::shared_ptr<nn::Embedding> position;
  std::shared_ptr<nn::ModuleList> blocks;
  std::shared_ptr<nn::LayerNorm> norm;
  std::shared_ptr<nn::Linear> head;

 private:
  GPTConfig config_;
};

}  // namespace tessera::models
