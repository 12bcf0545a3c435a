#pragma once

// Shared test oracles: value comparison, finite-difference gradient checks
// and the SBP signature checker. Every op test uses these.

#include <gtest/gtest.h>

#include <cstdlib>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "tessera/ops/op.h"
#include "tessera/tessera.h"

namespace tessera::testing {

// f64 tensor from values; without a shape, one value gives a 0-d tensor and
// several a 1-D tensor.
Tensor make(const std::vector<double>& values, Shape shape = {}, DType dtype = DType::f64);
// Deterministic random f64 tensor in [low, high).
Tensor uniform(const Shape& shape, double low = -1.0, double high = 1.0, uint64_t seed = 1,
               DType dtype = DType::f64);

// Elementwise |actual - expected| <= atol + rtol * |expected|; NaN matches NaN.
::testing::AssertionResult all_close(const Tensor& actual, const std::vector<double>& expected,
                                     double rtol = 1e-5, double atol = 1e-6);
::testing::AssertionResult all_close(const Tensor& actual, const Tensor& expected,
                                     double rtol = 1e-5, double atol = 1e-6);

// The message of the tessera::Error fn throws, or "no error".
std::string error_of(const std::function<void()>& fn);

// A function of tensors returning one tensor, for gradient checks.
using TensorFn = std::function<Tensor(const std::vector<Tensor>&)>;

// Compares autograd's gradient of sum(fn(inputs) * w) (w random) against
// central finite differences, for every input that requires grad. Inputs
// should be f64.
::testing::AssertionResult gradcheck(const TensorFn& fn, const std::vector<Tensor>& inputs,
                                     double eps = 1e-6, double rtol = 1e-4, double atol = 1e-6);
// The same for the gradient itself (second order, through create_graph).
::testing::AssertionResult gradgradcheck(const TensorFn& fn, const std::vector<Tensor>& inputs,
                                         double eps = 1e-6, double rtol = 1e-4,
                                         double atol = 1e-6);

// Runs `op` once per declared SBP signature: inputs are split into k shards
// as the signature says (k = 2 and 3, uneven included), the op runs locally
// on each shard (attrs localized), outputs are combined as the output SBP
// says and compared with the unsharded result. Returns failure naming the
// op and signature on mismatch.
::testing::AssertionResult check_sbp(const std::string& op_name, const std::vector<Tensor>& inputs,
                                     const Attrs& attrs = {}, double rtol = 1e-5,
                                     double atol = 1e-6);

// Shards of `x` under `sbp` on `parts` ranks (uneven splits; random
// decompositions for partial values, fixed by `seed`), and where each
// shard starts.
std::vector<Tensor> make_shards(const Tensor& x, const Sbp& sbp, int64_t parts, uint64_t seed,
                                std::vector<std::vector<int64_t>>& starts);

// A registry of SBP cases so one test can sweep them and verify that every
// registered op has at least one. Register with TESSERA_SBP_CASE.
struct SbpCase {
  std::string op;
  std::function<std::vector<Tensor>()> inputs;
  Attrs attrs;
  double rtol = 1e-5;
  double atol = 1e-6;
};
std::vector<SbpCase>& sbp_cases();
bool add_sbp_case(std::string op, std::function<std::vector<Tensor>()> inputs,
                  Attrs attrs = {}, double rtol = 1e-5, double atol = 1e-6);

// Sets (or, with nullopt, removes) an environment variable for one scope.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, std::optional<std::string> value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value) {
      ::setenv(name, value->c_str(), 1);
    } else {
      ::unsetenv(name);
    }
  }
  ~ScopedEnv() {
    if (old_) {
      ::setenv(name_, old_->c_str(), 1);
    } else {
      ::unsetenv(name_);
    }
  }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

}  // namespace tessera::testing

// Expects `text` to contain `piece`, printing the text when it does not.
#define EXPECT_HAS(text, piece) EXPECT_NE((text).find(piece), std::string::npos) << (text)

// TESSERA_SBP_CASE("add", [] { return std::vector<Tensor>{a, b}; }, Attrs{...});
#define TESSERA_SBP_CASE(...)                                                   \
  static const bool TESSERA_CONCAT(sbp_case_, __COUNTER__) =                    \
      ::tessera::testing::add_sbp_case(__VA_ARGS__)
