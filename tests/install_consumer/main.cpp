// Built against an installed Tessera (find_package(Tessera)) by run.sh: a
// matmul and its backward pass, checked against values worked out by hand.
#include <cstdio>
#include <vector>

#include "tessera/tessera.h"

using namespace tessera;

namespace {

// Prints name = values and says whether they are exactly the expected ones
// (small integers, exact in f32).
bool check(const char* name, const Tensor& x, const std::vector<float>& expected) {
  const std::vector<float> values = x.to_vector<float>();
  std::printf("%s =", name);
  for (float value : values) std::printf(" %g", value);
  const bool ok = values == expected;
  std::printf(ok ? "\n" : "  MISMATCH\n");
  return ok;
}

int run() {
  Tensor a = Tensor::from_vector(std::vector<float>{1, 2, 3, 4}, {2, 2}).set_requires_grad();
  Tensor b = Tensor::from_vector(std::vector<float>{5, 6, 7, 8}, {2, 2}).set_requires_grad();
  Tensor y = matmul(a, b);
  Tensor loss = sum(y);
  loss.backward();
  // d sum(a @ b) / da = ones @ b^T; / db = a^T @ ones.
  bool ok = check("a @ b", y, {19, 22, 43, 50});
  ok = check("sum(a @ b)", loss, {134}) && ok;
  ok = check("grad a", a.grad(), {11, 15, 11, 15}) && ok;
  ok = check("grad b", b.grad(), {4, 4, 6, 6}) && ok;
  return ok ? 0 : 1;
}

}  // namespace

int main() {
  try {
    return run();
  } catch (const std::exception& error) {
    std::fprintf(stderr, "install_consumer: %s\n", error.what());
    return 1;
  }
}
