#include "tessera/planner/described_models.h"

#include "tessera/graph/trace.h"
#include "tessera/tessera.h"

namespace tessera::planner {

int64_t gpt_parameters(const GptSpec& spec) {
  const int64_t d = spec.d_model;
  const int64_t block = 4 * (d * d + d) + 2 * (4 * d * d) + 4 * d + d + 2 * (2 * d);
  return spec.layers * block + spec.vocab * d + spec.sequence * d + 2 * d + spec.vocab * d +
         spec.vocab;
}

graph::Graph trace_gpt_step(const GptSpec& spec, nn::Module::NamedTensors& names) {
  return trace_gpt_stage(spec, GptStage{0, spec.layers, true, true}, names);
}

graph::Graph trace_gpt_stage(const GptSpec& spec, const GptStage& stage,
                             nn::Module::NamedTensors& names) {
  for (auto [field, value] : {std::pair<const char*, int64_t>{"layers", spec.layers},
                              {"d_model", spec.d_model},
                              {"heads", spec.heads},
                              {"vocab", spec.vocab},
                              {"sequence", spec.sequence},
                              {"batch", spec.batch}}) {
    TESSERA_CHECK(value >= 1, "[trace_gpt_step] ", field, " must be at least 1, got ", value);
  }
  TESSERA_CHECK(stage.first_layer >= 0 && stage.layers >= 0 &&
                    stage.first_layer + stage.layers <= spec.layers,
                "[trace_gpt_stage] layers [", stage.first_layer, ", ",
                stage.first_layer + stage.layers, ") are not within the model's ", spec.layers,
                " layers");
  TESSERA_CHECK(stage.layers >= 1 || stage.first || stage.last,
                "[trace_gpt_stage] a middle stage needs at least one layer");
  TESSERA_CHECK(spec.d_model % spec.heads == 0, "[trace_gpt_step] heads (", spec.heads,
                ") must divide d_model (", spec.d_model, ")");
  names.clear();
  auto parameter = [&](const std::string& name, const Shape& shape) {
    Tensor tensor = Tensor::empty(shape, spec.dtype, Device::meta());
    tensor.requires_grad_();
    names.emplace_back(name, tensor);
    return tensor;
  };
  const int64_t d = spec.d_model;
  const int64_t b = spec.batch;
  const int64_t t = spec.sequence;
  const int64_t h = spec.heads;
  struct Linear {
    Tensor weight, bias;
    Tensor operator()(const Tensor& x) const { return add(matmul(x, weight.t()), bias); }
  };
  auto linear = [&](const std::string& name, int64_t in, int64_t out) {
    return Linear{parameter(name + ".weight", {out, in}), parameter(name + ".bias", {out})};
  };
  struct Norm {
    Tensor weight, bias;
  };
  auto norm = [&](const std::string& name) {
    return Norm{parameter(name + ".weight", {d}), parameter(name + ".bias", {d})};
  };
  Tensor token, position;
  if (stage.first) {
    token = parameter("token.weight", {spec.vocab, d});
    position = parameter("position.weight", {t, d});
  }
  struct Block {
    Norm norm1, norm2;
    Linear q, k, v, out, linear1, linear2;
  };
  std::vector<Block> blocks;
  for (int64_t l = stage.first_layer; l < stage.first_layer + stage.layers; ++l) {
    const std::string at = "blocks." + std::to_string(l) + ".";
    blocks.push_back({norm(at + "norm1"), norm(at + "norm2"), linear(at + "attn.q", d, d),
                      linear(at + "attn.k", d, d), linear(at + "attn.v", d, d),
                      linear(at + "attn.out", d, d), linear(at + "linear1", d, 4 * d),
                      linear(at + "linear2", 4 * d, d)});
  }
  Norm final_norm;
  Linear head;
  if (stage.last) {
    final_norm = norm("norm");
    head = linear("head", d, spec.vocab);
  }

  auto step = [&](const TensorVector& batch) -> TensorVector {
    Tensor x;
    Tensor received;  // the activation this stage is handed
    if (stage.first) {
      const Tensor positions = arange(0, t, 1, DType::i64);
      x = add(embedding(token, batch[0]), embedding(position, positions));
    } else {
      received = batch[0];
      received.requires_grad_();
      x = received;
    }
    for (const Block& block : blocks) {
      Tensor normed = layer_norm(x, {d}, block.norm1.weight, block.norm1.bias);
      auto heads = [&](const Tensor& y) {
        return y.reshape({b, t, h, d / h}).permute({0, 2, 1, 3});
      };
      Tensor attended = nn::scaled_dot_product_attention(
          heads(block.q(normed)), heads(block.k(normed)), heads(block.v(normed)), {}, 0.0, true);
      x = add(x, block.out(attended.permute({0, 2, 1, 3}).reshape({b, t, d})));
      Tensor hidden = gelu(block.linear1(layer_norm(x, {d}, block.norm2.weight, block.norm2.bias)));
      x = add(x, block.linear2(hidden));
    }
    TensorVector outputs;
    if (stage.last) {
      Tensor logits = head(layer_norm(x, {d}, final_norm.weight, final_norm.bias));
      Tensor loss = cross_entropy(logits.reshape({b * t, spec.vocab}), batch[1].reshape({b * t}));
      loss.backward();
      outputs.push_back(loss);
    } else {
      x.backward(batch[1]);
      outputs.push_back(x);
    }
    if (!stage.first) outputs.push_back(received.grad());
    return outputs;
  };
  const TensorMeta tokens{{b, t}, DType::i64, Device{}};
  const TensorMeta activation{{b, t, d}, spec.dtype, Device{}};
  return graph::trace(
      step, MetaVector{stage.first ? tokens : activation, stage.last ? tokens : activation},
      graph::TraceOptions{true});
}

}  // namespace tessera::planner
