#pragma once

// The small CNN of the Fashion-MNIST example and the training benchmark:
// conv 32 3x3, ReLU, max-pool, conv 64 3x3, ReLU, max-pool, linear 128,
// ReLU, linear 10. Input [B, 1, 28, 28], output logits [B, 10].

#include <memory>

#include "tessera/tessera.h"

namespace tessera::models {

inline std::shared_ptr<nn::Sequential> make_cnn(int64_t num_classes = 10) {
  return std::make_shared<nn::Sequential>(std::initializer_list<std::shared_ptr<nn::Module>>{
      std::make_shared<nn::Conv2d>(1, 32, 3, /*stride=*/1, /*padding=*/1),
      std::make_shared<nn::ReLU>(),
      std::make_shared<nn::MaxPool2d>(2),
      std::make_shared<nn::Conv2d>(32, 64, 3, /*stride=*/1, /*padding=*/1),
      std::make_shared<nn::ReLU>(),
      std::make_shared<nn::MaxPool2d>(2),
      std::make_shared<nn::Flatten>(),
      std::make_shared<nn::Linear>(64 * 7 * 7, 128),
      std::make_shared<nn::ReLU>(),
      std::make_shared<nn::Linear>(128, num_classes),
  });
}

// The MLP of the training benchmark: 784-1024-1024-10 with ReLU.
inline std::shared_ptr<nn::Sequential> make_mlp() {
  return std::make_shared<nn::Sequential>(std::initializer_list<std::shared_ptr<nn::Module>>{
      std::make_shared<nn::Linear>(784, 1024),
      std::make_shared<nn::ReLU>(),
      std::make_shared<nn::Linear>(1024, 1024),
      std::make_shared<nn::ReLU>(),
      std::make_shared<nn::Linear>(1024, 10),
  });
}

}  // namespace tessera::models
