// CPU kernels for the indexing ops (ops/index.cpp). The three lookups are one
// strided gather loop: each output element reads x at a base offset that
// moves with the output's coordinates plus index * x's stride along `dim`.
// The two scatters walk the index's extent along `dim` serially for each
// fibre of the other coordinates, and fibres are split across threads, so
// every output element is accumulated by one thread in a fixed order.

#include <cmath>
#include <string>
#include <type_traits>
#include <vector>

#include "tessera/backend/cpu/data_movement.h"
#include "tessera/ops/op.h"

namespace tessera::cpu {

namespace {

[[noreturn]] void bad_index(const std::string& op, int64_t value, int64_t dim, int64_t size) {
  if (size == 0) {
    TESSERA_FAIL("[", op, "] index ", value, " is out of range: dim ", dim,
                 " has size 0, so no index is valid");
  }
  TESSERA_FAIL("[", op, "] index ", value, " is out of range for dim ", dim, " of size ", size,
               "; valid indices are 0 to ", size - 1);
}

template <typename Fn>
void dispatch_index(DType dtype, Fn&& fn) {
  if (dtype == DType::i64) {
    fn(int64_t{});
  } else {
    fn(int32_t{});
  }
}

// Where one gather reads: x's strides per output axis (0 where the
// coordinate comes from the index), the index's strides per output axis,
// and the indexed axis of x.
struct GatherPlan {
  Strides x_strides;
  Strides index_strides;
  int64_t dim = 0;
};

// Throws unless every entry of index lies in [0, size).
template <typename I>
void validate_index(const std::string& op, const Tensor& index, int64_t dim, int64_t size) {
  const I* base = storage_ptr<I>(index);
  auto loop = make_loop<1>(index.shape(), {index.strides()}, {index.offset()});
  for_each_run(loop, [&](const std::array<int64_t, 1>& offsets,
                         const std::array<int64_t, 1>& strides, int64_t n) {
    for (int64_t i = 0; i < n; ++i) {
      int64_t v = base[offsets[0] + i * strides[0]];
      if (v < 0 || v >= size) bad_index(op, v, dim, size);
    }
  });
}

void run_gather(KernelContext& ctx, const Tensor& x, const Tensor& index, const GatherPlan& plan) {
  Tensor& out = ctx.outputs[0];
  const std::string& op = ctx.op.name;
  const int64_t size = x.shape()[plan.dim];
  const int64_t dim_stride = x.strides()[plan.dim];
  if (out.numel() == 0) {
    // Nothing to copy, but bad indices are still an error.
    dispatch_index(index.dtype(),
                   [&](auto tag) { validate_index<decltype(tag)>(op, index, plan.dim, size); });
    return;
  }
  auto loop = make_loop<3>(out.shape(), {out.strides(), plan.x_strides, plan.index_strides},
                           {out.offset(), x.offset(), index.offset()});
  dispatch_by_size(x.dtype(), [&](auto value_tag) {
    using T = decltype(value_tag);
    dispatch_index(index.dtype(), [&](auto index_tag) {
      using I = decltype(index_tag);
      T* out_base = storage_ptr<T>(out);
      const T* x_base = storage_ptr<T>(x);
      const I* index_base = storage_ptr<I>(index);
      // An index smaller than the output (index_select, embedding) is read
      // repeatedly: checking it once keeps the copy loops free of branches.
      const bool checked = index.numel() < out.numel();
      if (checked) validate_index<I>(op, index, plan.dim, size);
      for_each_run(loop, [&](const std::array<int64_t, 3>& offsets,
                             const std::array<int64_t, 3>& strides, int64_t n) {
        T* __restrict po = out_base + offsets[0];
        const T* px = x_base + offsets[1];
        const I* pi = index_base + offsets[2];
        if (strides[2] == 0) {
          // One index for the whole run (embedding, index_select): a row copy.
          int64_t v = pi[0];
          if (!checked && (v < 0 || v >= size)) bad_index(op, v, plan.dim, size);
          const T* __restrict src = px + v * dim_stride;
          if (strides[0] == 1 && strides[1] == 1) {
            for (int64_t i = 0; i < n; ++i) po[i] = src[i];
          } else {
            for (int64_t i = 0; i < n; ++i) po[i * strides[0]] = src[i * strides[1]];
          }
          return;
        }
        if (checked) {
          for (int64_t i = 0; i < n; ++i) {
            po[i * strides[0]] = px[i * strides[1] + int64_t{pi[i * strides[2]]} * dim_stride];
          }
          return;
        }
        for (int64_t i = 0; i < n; ++i) {
          int64_t v = pi[i * strides[2]];
          if (v < 0 || v >= size) bad_index(op, v, plan.dim, size);
          po[i * strides[0]] = px[i * strides[1] + v * dim_stride];
        }
      });
    });
  });
}

Strides zero_at(Strides strides, int64_t dim) {
  strides[dim] = 0;
  return strides;
}

void embedding_kernel(KernelContext& ctx) {
  const Tensor& weight = ctx.inputs[0];
  const Tensor& indices = ctx.inputs[1];
  GatherPlan plan;
  plan.x_strides.assign(indices.dim(), 0);
  plan.x_strides.push_back(weight.strides()[1]);
  plan.index_strides = indices.strides();
  plan.index_strides.push_back(0);
  plan.dim = 0;
  run_gather(ctx, weight, indices, plan);
}

void index_select_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.inputs[0];
  const Tensor& index = ctx.inputs[1];
  int64_t dim = ctx.attrs.i("dim");
  GatherPlan plan;
  plan.x_strides = zero_at(x.strides(), dim);
  plan.index_strides.assign(x.dim(), 0);
  plan.index_strides[dim] = index.strides()[0];
  plan.dim = dim;
  run_gather(ctx, x, index, plan);
}

void gather_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.inputs[0];
  const Tensor& index = ctx.inputs[1];
  int64_t dim = ctx.attrs.i("dim");
  run_gather(ctx, x, index, {zero_at(x.strides(), dim), index.strides(), dim});
}

// for_each_run where each loop element stands for `weight` units of work
// (the scatters loop over the indexed axis inside each element).
template <size_t N, typename Fn>
void for_each_weighted_run(const StridedLoop<N>& loop, int64_t weight, Fn&& fn) {
  const int64_t ndim = static_cast<int64_t>(loop.shape.size());
  const int64_t inner = loop.shape.back();
  const int64_t cost = std::max<int64_t>(weight, 1);
  int64_t rows = 1;
  for (int64_t d = 0; d + 1 < ndim; ++d) rows *= loop.shape[d];
  std::array<int64_t, N> inner_strides;
  for (size_t k = 0; k < N; ++k) inner_strides[k] = loop.strides[k].back();
  if (rows == 1) {
    parallel_for(0, inner, std::max<int64_t>(1, kElementwiseGrain / cost),
                 [&](int64_t lo, int64_t hi) {
                   std::array<int64_t, N> offsets;
                   for (size_t k = 0; k < N; ++k) offsets[k] = loop.base[k] + lo * inner_strides[k];
                   fn(offsets, inner_strides, hi - lo);
                 });
    return;
  }
  int64_t grain = std::max<int64_t>(1, kElementwiseGrain / std::max<int64_t>(inner * cost, 1));
  parallel_for(0, rows, grain, [&](int64_t lo, int64_t hi) {
    for (int64_t row = lo; row < hi; ++row) {
      std::array<int64_t, N> offsets = loop.base;
      int64_t remaining = row;
      for (int64_t d = ndim - 2; d >= 0; --d) {
        int64_t coordinate = remaining % loop.shape[d];
        remaining /= loop.shape[d];
        for (size_t k = 0; k < N; ++k) offsets[k] += coordinate * loop.strides[k][d];
      }
      fn(offsets, inner_strides, inner);
    }
  });
}

// out (a copy of x) += alpha * src over `space`, at out coordinates equal to
// the source coordinates except along dim, where the index says.
void run_scatter(KernelContext& ctx, const Shape& space, const Strides& index_strides,
                 const Tensor& index, const Tensor& src, double alpha) {
  const Tensor& x = ctx.inputs[0];
  Tensor& out = ctx.outputs[0];
  const std::string& op = ctx.op.name;
  const int64_t dim = ctx.attrs.i("dim");
  copy_into(x, out);
  const int64_t size = out.shape()[dim];
  const int64_t length = space[dim];
  const int64_t out_dim_stride = out.strides()[dim];
  const int64_t index_dim_stride = index_strides[dim];
  const int64_t src_dim_stride = src.strides()[dim];
  if (numel(space) == 0) {
    dispatch_index(index.dtype(),
                   [&](auto tag) { validate_index<decltype(tag)>(op, index, dim, size); });
    return;
  }
  Shape fibres = space;
  fibres[dim] = 1;
  auto loop = make_loop<3>(fibres, {out.strides(), index_strides, src.strides()},
                           {out.offset(), index.offset(), src.offset()});
  TESSERA_DISPATCH_NUMERIC(out.dtype(), op, [&] {
    using T = scalar_t;
    const T scale = static_cast<T>(alpha);
    dispatch_index(index.dtype(), [&](auto index_tag) {
      using I = decltype(index_tag);
      T* out_base = storage_ptr<T>(out);
      const T* src_base = storage_ptr<T>(src);
      const I* index_base = storage_ptr<I>(index);
      for_each_weighted_run(loop, length,
                            [&](const std::array<int64_t, 3>& offsets,
                                const std::array<int64_t, 3>& strides, int64_t n) {
                              if (strides[0] > out_dim_stride) {
                                // dim is the inner axis: finish one fibre at a time for locality.
                                for (int64_t i = 0; i < n; ++i) {
                                  const I* pi = index_base + offsets[1] + i * strides[1];
                                  const T* ps = src_base + offsets[2] + i * strides[2];
                                  T* po = out_base + offsets[0] + i * strides[0];
                                  for (int64_t j = 0; j < length; ++j) {
                                    int64_t v = pi[j * index_dim_stride];
                                    if (v < 0 || v >= size) bad_index(op, v, dim, size);
                                    po[v * out_dim_stride] += scale * ps[j * src_dim_stride];
                                  }
                                }
                                return;
                              }
                              for (int64_t j = 0; j < length; ++j) {
                                const I* pi = index_base + offsets[1] + j * index_dim_stride;
                                const T* __restrict ps = src_base + offsets[2] + j * src_dim_stride;
                                if (strides[1] == 0) {
                                  int64_t v = pi[0];
                                  if (v < 0 || v >= size) bad_index(op, v, dim, size);
                                  T* __restrict po = out_base + offsets[0] + v * out_dim_stride;
                                  if (strides[0] == 1 && strides[2] == 1) {
                                    for (int64_t i = 0; i < n; ++i) po[i] += scale * ps[i];
                                  } else {
                                    for (int64_t i = 0; i < n; ++i)
                                      po[i * strides[0]] += scale * ps[i * strides[2]];
                                  }
                                  continue;
                                }
                                for (int64_t i = 0; i < n; ++i) {
                                  int64_t v = pi[i * strides[1]];
                                  if (v < 0 || v >= size) bad_index(op, v, dim, size);
                                  out_base[offsets[0] + i * strides[0] + v * out_dim_stride] +=
                                      scale * ps[i * strides[2]];
                                }
                              }
                            });
    });
  });
}

void scatter_add_kernel(KernelContext& ctx) {
  const Tensor& index = ctx.inputs[1];
  run_scatter(ctx, index.shape(), index.strides(), index, ctx.inputs[2], 1.0);
}

void index_add_kernel(KernelContext& ctx) {
  const Tensor& index = ctx.inputs[1];
  const Tensor& source = ctx.inputs[2];
  Strides index_strides(source.dim(), 0);
  index_strides[ctx.attrs.i("dim")] = index.strides()[0];
  run_scatter(ctx, source.shape(), index_strides, index, source, ctx.attrs.f("alpha"));
}

// How scatter and scatter_reduce combine an entry of src with out.
enum class Combine { assign, sum, prod, mean, amax, amin };

Combine combine_from(const std::string& reduce) {
  if (reduce == "sum") return Combine::sum;
  if (reduce == "prod") return Combine::prod;
  if (reduce == "mean") return Combine::mean;
  if (reduce == "amax") return Combine::amax;
  if (reduce == "amin") return Combine::amin;
  TESSERA_FAIL("[scatter_reduce] unknown reduce '", reduce,
               "'; valid: sum, prod, mean, amax, amin");
}

template <typename T>
bool is_nan(T value) {
  if constexpr (std::is_floating_point_v<T>) {
    return std::isnan(value);
  } else {
    return false;
  }
}

// Calls fn(out offset, src value) for every entry of index (the scatter's
// extent) on a copy of x in ctx.outputs[0]. Each out element is reached by
// one fibre, walked in index order, so the result is deterministic.
template <typename T, typename I, typename Fn>
void walk_scatter(KernelContext& ctx, Fn&& fn) {
  const Tensor& index = ctx.inputs[1];
  const Tensor& src = ctx.inputs[2];
  Tensor& out = ctx.outputs[0];
  const std::string& op = ctx.op.name;
  const int64_t dim = ctx.attrs.i("dim");
  const int64_t size = out.shape()[dim];
  const int64_t length = index.shape()[dim];
  const int64_t out_dim_stride = out.strides()[dim];
  const int64_t index_dim_stride = index.strides()[dim];
  const int64_t src_dim_stride = src.strides()[dim];
  Shape fibres = index.shape();
  fibres[dim] = 1;
  auto loop = make_loop<3>(fibres, {out.strides(), index.strides(), src.strides()},
                           {out.offset(), index.offset(), src.offset()});
  const I* index_base = storage_ptr<I>(index);
  const T* src_base = storage_ptr<T>(src);
  for_each_weighted_run(loop, length,
                        [&](const std::array<int64_t, 3>& offsets,
                            const std::array<int64_t, 3>& strides, int64_t n) {
                          for (int64_t i = 0; i < n; ++i) {
                            const I* pi = index_base + offsets[1] + i * strides[1];
                            const T* ps = src_base + offsets[2] + i * strides[2];
                            const int64_t po = offsets[0] + i * strides[0];
                            for (int64_t j = 0; j < length; ++j) {
                              const int64_t v = pi[j * index_dim_stride];
                              if (v < 0 || v >= size) bad_index(op, v, dim, size);
                              fn(po + v * out_dim_stride, ps[j * src_dim_stride]);
                            }
                          }
                        });
}

// Copies x to the output; false (after checking the indices) when index is empty.
bool start_scatter(KernelContext& ctx) {
  const Tensor& index = ctx.inputs[1];
  copy_into(ctx.inputs[0], ctx.outputs[0]);
  if (index.numel() > 0) return true;
  const int64_t dim = ctx.attrs.i("dim");
  dispatch_index(index.dtype(), [&](auto tag) {
    validate_index<decltype(tag)>(ctx.op.name, index, dim, ctx.outputs[0].shape()[dim]);
  });
  return false;
}

void scatter_kernel(KernelContext& ctx) {
  if (!start_scatter(ctx)) return;
  dispatch_by_size(ctx.outputs[0].dtype(), [&](auto value_tag) {
    using T = decltype(value_tag);
    dispatch_index(ctx.inputs[1].dtype(), [&](auto index_tag) {
      T* out = storage_ptr<T>(ctx.outputs[0]);
      walk_scatter<T, decltype(index_tag)>(ctx, [out](int64_t p, T value) { out[p] = value; });
    });
  });
}

// out[p] = reduce(out[p] (unless !include_self), every src entry sent to p).
// Entries reaching p are counted (out is a fresh contiguous tensor) for the
// mean and for replacing x's value on the first entry when !include_self.
void scatter_reduce_kernel(KernelContext& ctx) {
  if (!start_scatter(ctx)) return;
  const Combine combine = combine_from(ctx.attrs.get<std::string>("reduce"));
  const bool include_self = ctx.attrs.b("include_self");
  Tensor& out = ctx.outputs[0];
  const bool counted = combine == Combine::mean || !include_self;
  std::vector<int32_t> hits(counted ? static_cast<size_t>(out.numel()) : 0, 0);
  TESSERA_DISPATCH_NUMERIC(out.dtype(), "scatter_reduce", [&] {
    using T = scalar_t;
    T* base = storage_ptr<T>(out);
    const int64_t first = out.offset();
    auto reduce_one = [combine](T& slot, T value) {
      switch (combine) {
        case Combine::sum:
        case Combine::mean:
          slot = static_cast<T>(slot + value);
          break;
        case Combine::prod:
          slot = static_cast<T>(slot * value);
          break;
        case Combine::amax:
          if (is_nan(value) || value > slot) slot = value;
          break;
        case Combine::amin:
          if (is_nan(value) || value < slot) slot = value;
          break;
        case Combine::assign:
          slot = value;
          break;
      }
    };
    dispatch_index(ctx.inputs[1].dtype(), [&](auto index_tag) {
      walk_scatter<T, decltype(index_tag)>(ctx, [&](int64_t p, T value) {
        if (!counted) {
          reduce_one(base[p], value);
          return;
        }
        int32_t& count = hits[static_cast<size_t>(p - first)];
        if (count == 0 && !include_self) {
          base[p] = value;
        } else {
          reduce_one(base[p], value);
        }
        ++count;
      });
    });
    if (combine != Combine::mean) return;
    parallel_for(0, out.numel(), kElementwiseGrain, [&](int64_t lo, int64_t hi) {
      for (int64_t k = lo; k < hi; ++k) {
        const int32_t count = hits[static_cast<size_t>(k)] + (include_self ? 1 : 0);
        if (hits[static_cast<size_t>(k)] == 0 || count == 1) continue;
        T& slot = base[first + k];
        if constexpr (std::is_floating_point_v<T>) {
          slot = static_cast<T>(slot / static_cast<T>(count));
        } else {
          // Integer means round down, as PyTorch's floor division does.
          const auto total = static_cast<int64_t>(slot);
          int64_t q = total / count;
          if (total % count != 0 && total < 0) --q;
          slot = static_cast<T>(q);
        }
      }
    });
  });
}

#define TESSERA_ALL_DTYPES                                                                     \
  ::tessera::DType::f32, ::tessera::DType::f64, ::tessera::DType::bf16, ::tessera::DType::f16, \
      ::tessera::DType::i64, ::tessera::DType::i32, ::tessera::DType::u8,                      \
      ::tessera::DType::boolean
#define TESSERA_SUM_DTYPES                                                                    \
  ::tessera::DType::f32, ::tessera::DType::f64, ::tessera::DType::i64, ::tessera::DType::i32, \
      ::tessera::DType::u8

TESSERA_REGISTER_KERNEL("embedding", cpu, embedding_kernel, TESSERA_ALL_DTYPES);
TESSERA_REGISTER_KERNEL("index_select", cpu, index_select_kernel, TESSERA_ALL_DTYPES);
TESSERA_REGISTER_KERNEL("gather", cpu, gather_kernel, TESSERA_ALL_DTYPES);
TESSERA_REGISTER_KERNEL("scatter_add", cpu, scatter_add_kernel, TESSERA_SUM_DTYPES);
TESSERA_REGISTER_KERNEL("index_add", cpu, index_add_kernel, TESSERA_SUM_DTYPES);
TESSERA_REGISTER_KERNEL("scatter", cpu, scatter_kernel, TESSERA_ALL_DTYPES);
TESSERA_REGISTER_KERNEL("scatter_reduce", cpu, scatter_reduce_kernel, TESSERA_SUM_DTYPES);

}  // namespace

}  // namespace tessera::cpu
