#pragma once

// The sizes of eager's gradient buckets (global/gradient_reducer.cpp),
// which the planner's memory prediction follows.

#include <cstddef>

namespace tessera::global {

// DDP's default bucket size: large enough that a bucket's all-reduce runs
// at full bandwidth, small enough that the concatenated copy stays modest.
inline constexpr size_t kGradientBucketBytes = size_t{25} << 20;
// The process's first bucket, as DDP's: small, so that communication starts
// early in the first backward.
inline constexpr size_t kFirstGradientBucketBytes = size_t{1} << 20;

}  // namespace tessera::global
