#pragma once

// A CIFAR-style ResNet of BasicBlocks with BatchNorm, written as PyTorch
// users write it (torchvision's BasicBlock): a 3x3 stem, three stages of
// `blocks_per_stage` BasicBlocks with 16, 32 and 64 channels (the last two
// halve the resolution, with a 1x1 convolution + BatchNorm shortcut),
// global average pooling and a linear classifier. Input [B, 3, 32, 32].
// The training benchmarks use one block per stage (ResNet-8).

#include <memory>

#include "tessera/tessera.h"

namespace tessera::models {

class BasicBlock : public nn::Module {
 public:
  BasicBlock(int64_t in_channels, int64_t channels, int64_t stride) : Module("BasicBlock") {
    conv1 = register_module("conv1", std::make_shared<nn::Conv2d>(in_channels, channels, 3, stride,
                                                                  1, 1, 1, /*bias=*/false));
    bn1 = register_module("bn1", std::make_shared<nn::BatchNorm2d>(channels));
    conv2 = register_module(
        "conv2", std::make_shared<nn::Conv2d>(channels, channels, 3, 1, 1, 1, 1, /*bias=*/false));
    bn2 = register_module("bn2", std::make_shared<nn::BatchNorm2d>(channels));
    if (stride != 1 || in_channels != channels) {
      downsample = register_module(
          "downsample",
          std::make_shared<nn::Sequential>(std::initializer_list<std::shared_ptr<nn::Module>>{
              std::make_shared<nn::Conv2d>(in_channels, channels, 1, stride, 0, 1, 1, false),
              std::make_shared<nn::BatchNorm2d>(channels)}));
    }
  }

  Tensor forward(const Tensor& x) override {
    Tensor out = relu((*bn1)((*conv1)(x)));
    out = (*bn2)((*conv2)(out));
    Tensor identity = downsample ? (*downsample)(x) : x;
    return relu(out + identity);
  }

  std::shared_ptr<nn::Conv2d> conv1, conv2;
  std::shared_ptr<nn::BatchNorm2d> bn1, bn2;
  std::shared_ptr<nn::Sequential> downsample;
};

class ResNet : public nn::Module {
 public:
  explicit ResNet(int64_t blocks_per_stage = 1, int64_t num_classes = 10) : Module("ResNet") {
    conv1 = register_module("conv1",
                            std::make_shared<nn::Conv2d>(3, 16, 3, 1, 1, 1, 1, /*bias=*/false));
    bn1 = register_module("bn1", std::make_shared<nn::BatchNorm2d>(16));
    int64_t in_channels = 16;
    const int64_t widths[] = {16, 32, 64};
    for (int64_t stage = 0; stage < 3; ++stage) {
      auto layer = std::make_shared<nn::Sequential>();
      for (int64_t block = 0; block < blocks_per_stage; ++block) {
        const int64_t stride = stage > 0 && block == 0 ? 2 : 1;
        layer->push_back(std::make_shared<BasicBlock>(in_channels, widths[stage], stride));
        in_channels = widths[stage];
      }
      layers.push_back(register_module("layer" + std::to_string(stage + 1), layer));
    }
    pool = register_module("avgpool", std::make_shared<nn::AdaptiveAvgPool2d>(1));
    fc = register_module("fc", std::make_shared<nn::Linear>(64, num_classes));
  }

  Tensor forward(const Tensor& x) override {
    Tensor h = relu((*bn1)((*conv1)(x)));
    for (const auto& layer : layers) h = layer->forward(h);
    return (*fc)((*pool)(h).flatten(1));
  }

  std::shared_ptr<nn::Conv2d> conv1;
  std::shared_ptr<nn::BatchNorm2d> bn1;
  std::vector<std::shared_ptr<nn::Sequential>> layers;
  std::shared_ptr<nn::AdaptiveAvgPool2d> pool;
  std::shared_ptr<nn::Linear> fc;
};

}  // namespace tessera::models
