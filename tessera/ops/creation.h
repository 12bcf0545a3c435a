#pragma once

// Factories. Random factories draw from the Philox generator: the value at
// each index depends only on (seed, offset, index).

#include <optional>

#include "tessera/core/rng.h"
#include "tessera/core/tensor.h"
#include "tessera/ops/scalar.h"

namespace tessera {

Tensor zeros(const Shape& shape, DType dtype = DType::f32);
Tensor ones(const Shape& shape, DType dtype = DType::f32);
Tensor full(const Shape& shape, Scalar value, std::optional<DType> dtype = std::nullopt);
// A 0-d tensor of `value` converted to `dtype` without range checks: an
// integer wraps into a narrower integer dtype, as PyTorch does for the scalar
// operand of x + 2 (full, by contrast, rejects a value that does not fit).
Tensor scalar_tensor(Scalar value, DType dtype);
// The same 0-d tensor for use beside tensor `like` (x + 2): on like's
// device when that is a CUDA device, so one op sees one device. Beside meta
// and global tensors it stays a CPU number: it keeps its value for a tracer
// and joins a global op as broadcast on every rank.
Tensor scalar_tensor(Scalar value, DType dtype, const Tensor& like);
// Zeros of meta's shape (and dtype unless given), global with meta's layout
// when meta is global: what gradient functions start from.
Tensor zeros_for(const TensorMeta& meta, std::optional<DType> dtype = std::nullopt);

// The *_like factories keep a global x's placement and SBP.
Tensor zeros_like(const Tensor& x, std::optional<DType> dtype = std::nullopt);
Tensor ones_like(const Tensor& x, std::optional<DType> dtype = std::nullopt);
Tensor full_like(const Tensor& x, Scalar value, std::optional<DType> dtype = std::nullopt);
Tensor empty_like(const Tensor& x);

// [start, end) in steps of `step`; i64 when all three are integers, else f32.
Tensor arange(Scalar end);
Tensor arange(Scalar start, Scalar end, Scalar step = 1, std::optional<DType> dtype = std::nullopt);
// `steps` evenly spaced values from start to end inclusive.
Tensor linspace(double start, double end, int64_t steps, DType dtype = DType::f32);
// n x m identity (m defaults to n).
Tensor eye(int64_t n, std::optional<int64_t> m = std::nullopt, DType dtype = DType::f32);

// Uniform [0, 1), standard normal, and integers in [low, high).
Tensor rand(const Shape& shape, DType dtype = DType::f32, Generator* generator = nullptr);
Tensor randn(const Shape& shape, DType dtype = DType::f32, Generator* generator = nullptr);
Tensor randint(int64_t low, int64_t high, const Shape& shape, DType dtype = DType::i64,
               Generator* generator = nullptr);
Tensor rand_like(const Tensor& x, Generator* generator = nullptr);
Tensor randn_like(const Tensor& x, Generator* generator = nullptr);
Tensor randint_like(const Tensor& x, int64_t low, int64_t high, Generator* generator = nullptr);
// The box [start, start + size) of what rand / randn(shape, dtype, generator)
// would give, drawn without the rest of the tensor. The generator advances
// as for the whole tensor, so later draws match too.
Tensor rand_region(const Shape& shape, const std::vector<int64_t>& start, const Shape& size,
                   DType dtype = DType::f32, Generator* generator = nullptr);
Tensor randn_region(const Shape& shape, const std::vector<int64_t>& start, const Shape& size,
                    DType dtype = DType::f32, Generator* generator = nullptr);

// Global factories: the same ops as the local ones, with the layout among
// their attributes (ops/layout_attrs.h), which the eager-global handler
// runs. The same logical values as the local ones, laid out on `placement`
// as `sbp`; each rank builds only its shard (random ones draw only their
// shard's values, and every rank's generator advances by the whole
// tensor). A partial-sum layout puts the values on the first rank of each
// partial axis and zeros on the others.
Tensor full(const Shape& shape, Scalar value, const Placement& placement, const NdSbp& sbp,
            std::optional<DType> dtype = std::nullopt);
Tensor zeros(const Shape& shape, const Placement& placement, const NdSbp& sbp,
             DType dtype = DType::f32);
Tensor ones(const Shape& shape, const Placement& placement, const NdSbp& sbp,
            DType dtype = DType::f32);
Tensor rand(const Shape& shape, const Placement& placement, const NdSbp& sbp,
            DType dtype = DType::f32, Generator* generator = nullptr);
Tensor randn(const Shape& shape, const Placement& placement, const NdSbp& sbp,
             DType dtype = DType::f32, Generator* generator = nullptr);

// Builds a tensor from nested initializer data: tensor({1.f, 2.f}) etc.
template <typename T>
Tensor tensor(std::initializer_list<T> values) {
  return Tensor::from_vector(std::vector<T>(values), {static_cast<int64_t>(values.size())});
}

}  // namespace tessera
