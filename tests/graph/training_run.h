#pragma once

// What a training run left, for comparing a compiled run with an eager one.

#include <vector>

#include "testing.h"

namespace tessera::testing {

struct TrainingRun {
  std::vector<double> losses;  // per step
  std::vector<Tensor> params;  // copies, after the last step
  std::vector<int64_t> allocations;  // per step, blocks taken from the CPU allocator
};

// The same losses and parameters, bit for bit.
inline void expect_same_run(const TrainingRun& eager, const TrainingRun& compiled) {
  ASSERT_EQ(eager.losses.size(), compiled.losses.size());
  for (size_t i = 0; i < eager.losses.size(); ++i) {
    EXPECT_EQ(eager.losses[i], compiled.losses[i]) << "step " << i;
  }
  ASSERT_EQ(eager.params.size(), compiled.params.size());
  for (size_t i = 0; i < eager.params.size(); ++i) {
    EXPECT_TRUE(equal(eager.params[i], compiled.params[i])) << "parameter " << i;
  }
}

}  // namespace tessera::testing
