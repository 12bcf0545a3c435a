// Quick start: tensors, ops and autograd. Fits y = 3x + 2 by gradient descent.
#include <cstdio>

#include "tessera/tessera.h"

using namespace tessera;

namespace {

int run() {
  manual_seed(0);
  Tensor x = randn({64, 1});
  Tensor y = x * 3.0 + 2.0;

  Tensor w = zeros({1, 1}).set_requires_grad();
  Tensor b = zeros({1}).set_requires_grad();
  for (int step = 0; step < 200; ++step) {
    Tensor prediction = x * w + b;
    Tensor loss = mean(square(prediction - y));
    loss.backward();
    {
      NoGradGuard no_grad;
      w = (w - w.grad() * 0.1).detach().set_requires_grad();
      b = (b - b.grad() * 0.1).detach().set_requires_grad();
    }
    if (step % 50 == 0) std::printf("step %3d  loss %.6f\n", step, loss.item<float>());
  }
  std::printf("w = %.4f (want 3), b = %.4f (want 2)\n", w.item<float>(), b.item<float>());
  return 0;
}

}  // namespace

int main() {
  try {
    return run();
  } catch (const std::exception& error) {
    std::fprintf(stderr, "quickstart: %s\n", error.what());
    return 1;
  }
}
