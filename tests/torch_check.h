#pragma once

// Checks an op against PyTorch in the same test run, one line per case (as
// tinygrad's helper_test_op does):
//
//   EXPECT_TRUE(matches_torch("torch.cumsum(a, dim=-1)", {uniform({3, 4})},
//                             [](const Inputs& x) { return cumsum(x[0], -1); }));
//
// The PyTorch side is a Python expression evaluated by one long-lived
// interpreter per test process (tests/torch_check.py, Debian's python3-torch).
// Inputs are named a, b, c, ... in order; `torch`, `F`
// (torch.nn.functional), `math`, `inf` and `nan` are in scope. Compared:
//  - errors: if PyTorch raises, Tessera must raise too, and the reverse;
//  - every output's shape, dtype and values (an expression returning a tuple
//    or list is compared element by element, in order);
//  - gradients: for every floating input, the gradient of
//    sum_k sum(out_k * w_k) over the floating outputs, for fixed random
//    weights w_k (PyTorch's None gradient counts as zeros).
//
// Without PyTorch the comparisons pass with a note, unless
// TESSERA_REQUIRE_TORCH is set (as CI does), where they fail. The
// interpreter is TESSERA_TORCH_PYTHON, else /usr/bin/python3.

#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "tessera/tessera.h"

namespace tessera::testing {

using Inputs = std::vector<Tensor>;

// What the Tessera side returns: one tensor or several.
struct Outputs {
  Outputs(Tensor tensor) : tensors{std::move(tensor)} {}  // NOLINT(google-explicit-constructor)
  Outputs(std::vector<Tensor> list) : tensors(std::move(list)) {}  // NOLINT
  template <typename A, typename B>
  Outputs(std::pair<A, B> pair) : tensors{pair.first, pair.second} {}  // NOLINT
  std::vector<Tensor> tensors;
};

using OpFn = std::function<Outputs(const Inputs&)>;

struct TorchOptions {
  double rtol = 1e-5;
  double atol = 1e-7;
  double grad_rtol = 1e-4;
  double grad_atol = 1e-6;
  // Compare gradients of floating inputs.
  bool grad = true;
  // sweep_torch: the range and dtype of the generated inputs (integer
  // dtypes draw integers in [low, high)).
  double low = -1.0;
  double high = 1.0;
  DType dtype = DType::f64;
  // sweep_torch: also run every case with non-contiguous inputs.
  bool non_contiguous = true;
};

// Runs fn on `inputs` and the PyTorch expression on the same values, and
// compares as described above. Floating inputs are copied into fresh leaves
// that require grad (when options.grad), so callers pass plain tensors.
::testing::AssertionResult matches_torch(const std::string& torch_expression, const Inputs& inputs,
                                         const OpFn& fn, const TorchOptions& options = {});

// One case per entry of `cases` (the shapes of all inputs), with random
// inputs (options.low/high/dtype; seeded, so reproducible), each run also
// with non-contiguous inputs of the same values.
::testing::AssertionResult sweep_torch(const std::string& torch_expression,
                                       const std::vector<std::vector<Shape>>& cases,
                                       const OpFn& fn, const TorchOptions& options = {});

// Same values as x, laid out non-contiguously (every element one apart).
Tensor non_contiguous_copy(const Tensor& x);

}  // namespace tessera::testing
