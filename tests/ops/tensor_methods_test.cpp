// The Tensor method forms of the ops (x.cumsum(1), x.sort(), x.scatter_(...)),
// each compared with PyTorch's method of the same name on the same values.

#include "testing.h"
#include "torch_check.h"

namespace tessera::testing {
namespace {

using V = std::vector<Tensor>;

TEST(TensorMethodsTorch, ReductionsScansAndSorting) {
  Tensor x = uniform({3, 4});
  EXPECT_TRUE(matches_torch("a.max(1)", {x}, [](const V& v) {
    auto [values, indices] = v[0].max(1);
    return V{values, indices};
  }));
  EXPECT_TRUE(matches_torch("a.min(0, keepdim=True)", {x}, [](const V& v) {
    auto [values, indices] = v[0].min(0, true);
    return V{values, indices};
  }));
  EXPECT_TRUE(matches_torch("a.amax((0, 1))", {x}, [](const V& v) { return v[0].amax({0, 1}); }));
  EXPECT_TRUE(matches_torch("a.amin(-1, True)", {x}, [](const V& v) { return v[0].amin({-1}, true); }));
  EXPECT_TRUE(matches_torch("a.prod()", {x}, [](const V& v) { return v[0].prod(); }));
  EXPECT_TRUE(matches_torch("a.prod(1, True)", {x}, [](const V& v) { return v[0].prod(1, true); }));
  EXPECT_TRUE(matches_torch("(a > 0).all()", {x}, [](const V& v) { return (v[0] > 0).all(); }));
  EXPECT_TRUE(matches_torch("(a > 0).any(1)", {x}, [](const V& v) { return (v[0] > 0).any(1); }));
  EXPECT_TRUE(matches_torch("a.var(1)", {x}, [](const V& v) { return v[0].var({1}); }));
  EXPECT_TRUE(matches_torch("a.std(0, correction=0)", {x},
                            [](const V& v) { return v[0].std({0}, 0); }));
  EXPECT_TRUE(matches_torch("a.logsumexp(1)", {x}, [](const V& v) { return v[0].logsumexp({1}); }));
  EXPECT_TRUE(matches_torch("(a > 0).count_nonzero()", {x},
                            [](const V& v) { return (v[0] > 0).count_nonzero(); }));
  EXPECT_TRUE(matches_torch("a.cumsum(1)", {x}, [](const V& v) { return v[0].cumsum(1); }));
  EXPECT_TRUE(matches_torch("a.cumprod(0)", {x}, [](const V& v) { return v[0].cumprod(0); }));
  EXPECT_TRUE(matches_torch("a.sort(descending=True)", {x}, [](const V& v) {
    auto [values, indices] = v[0].sort(-1, true);
    return V{values, indices};
  }));
  EXPECT_TRUE(matches_torch("a.argsort(0)", {x}, [](const V& v) { return v[0].argsort(0); }));
  EXPECT_TRUE(matches_torch("a.topk(2)", {x}, [](const V& v) {
    auto [values, indices] = v[0].topk(2);
    return V{values, indices};
  }));
}

TEST(TensorMethodsTorch, Elementwise) {
  Tensor x = uniform({3, 4}, -3, 3), y = uniform({3, 4}, 0.5, 2, 2);
  EXPECT_TRUE(matches_torch("a.add(b).sub(2).mul(b).div(3)", {x, y},
                            [](const V& v) { return v[0].add(v[1]).sub(2).mul(v[1]).div(3); }));
  EXPECT_TRUE(matches_torch("(a.eq(b), a.ne(0.5), a.lt(b), a.le(0), a.gt(b), a.ge(1))", {x, y},
                            [](const V& v) {
                              return V{v[0].eq(v[1]), v[0].ne(0.5), v[0].lt(v[1]),
                                       v[0].le(0),    v[0].gt(v[1]), v[0].ge(1)};
                            }));
  EXPECT_TRUE(matches_torch("(a.maximum(b), a.minimum(b), a.remainder(b), a.fmod(1.5))", {x, y},
                            [](const V& v) {
                              return V{v[0].maximum(v[1]), v[0].minimum(v[1]),
                                       v[0].remainder(v[1]), v[0].fmod(1.5)};
                            }));
  EXPECT_TRUE(matches_torch(
      "(a.floor(), a.ceil(), a.round(decimals=1), a.trunc(), a.frac(), a.sign())", {x},
      [](const V& v) {
        return V{v[0].floor(), v[0].ceil(), v[0].round(1), v[0].trunc(), v[0].frac(), v[0].sign()};
      }));
  EXPECT_TRUE(matches_torch("(b.reciprocal(), b.log1p(), a.expm1(), b.log2(), b.log10(), a.erf(), "
                            "a.erfc())",
                            {x, y}, [](const V& v) {
                              return V{v[1].reciprocal(), v[1].log1p(), v[0].expm1(), v[1].log2(),
                                       v[1].log10(),      v[0].erf(),   v[0].erfc()};
                            }));
  EXPECT_TRUE(matches_torch("(a.log().isnan(), (a / 0).isinf(), a.log().isfinite(), "
                            "a.log().nan_to_num())",
                            {x}, [](const V& v) {
                              return V{v[0].log().isnan(), v[0].div(0).isinf(),
                                       v[0].log().isfinite(), v[0].log().nan_to_num()};
                            }));
  EXPECT_TRUE(matches_torch("(a.lerp(b, 0.25), a.where(a > 0, b), a.masked_fill(a < 0, 7))",
                            {x, y}, [](const V& v) {
                              return V{v[0].lerp(v[1], 0.25), v[0].where(v[0] > 0, v[1]),
                                       v[0].masked_fill(v[0] < 0, 7)};
                            }));
  EXPECT_TRUE(matches_torch("((a > 0).logical_not(), (a > 0).logical_and(b > 1), "
                            "(a > 0).logical_or(b > 1))",
                            {x, y}, [](const V& v) {
                              return V{(v[0] > 0).logical_not(), (v[0] > 0).logical_and(v[1] > 1),
                                       (v[0] > 0).logical_or(v[1] > 1)};
                            }));
}

TEST(TensorMethodsTorch, ShapesIndexingAndLinearAlgebra) {
  Tensor x = uniform({3, 4});
  Tensor index = Tensor::from_vector<int64_t>({2, 0, 1, 1}, {1, 4});
  EXPECT_TRUE(matches_torch("(a.flip([0]), a.roll(1, 1), a.repeat(2, 1), a.tile((2,)), "
                            "a.repeat_interleave(2, 0), a.movedim(0, 1), a.swapaxes(0, 1), a.t())",
                            {x}, [](const V& v) {
                              return V{v[0].flip({0}),       v[0].roll({1}, {1}),
                                       v[0].repeat({2, 1}),  v[0].tile({2}),
                                       v[0].repeat_interleave(2, 0), v[0].movedim(0, 1),
                                       v[0].swapaxes(0, 1),  v[0].t()};
                            }));
  EXPECT_TRUE(matches_torch("a.unbind(1)", {x}, [](const V& v) { return v[0].unbind(1); }));
  EXPECT_TRUE(matches_torch("(a.gather(0, b), a.take_along_dim(b, 0), a.index_select(1, b[0]))",
                            {x, index}, [](const V& v) {
                              return V{v[0].gather(0, v[1]), v[0].take_along_dim(v[1], 0),
                                       v[0].index_select(1, v[1].reshape({4}))};
                            }));
  EXPECT_TRUE(matches_torch("(a.scatter(0, b, a), a.scatter(0, b, 2.5), a.scatter_add(0, b, a), "
                            "a.scatter_reduce(0, b, a, 'amax', include_self=False))",
                            {x, index}, [](const V& v) {
                              return V{v[0].scatter(0, v[1], v[0]), v[0].scatter(0, v[1], 2.5),
                                       v[0].scatter_add(0, v[1], v[0]),
                                       v[0].scatter_reduce(0, v[1], v[0], "amax", false)};
                            }));
  EXPECT_TRUE(matches_torch("(a.index_add(1, b[0], a, alpha=2), a.index_fill(1, b[0], -1), "
                            "a.masked_select(a > 0), (a > 0).nonzero())",
                            {x, index}, [](const V& v) {
                              Tensor flat = v[1].reshape({4});
                              return V{v[0].index_add(1, flat, v[0], 2), v[0].index_fill(1, flat, -1),
                                       v[0].masked_select(v[0] > 0), (v[0] > 0).nonzero()};
                            }));
  Tensor m = uniform({4, 3}, -1, 1, 3), vec = uniform({3}, -1, 1, 4);
  EXPECT_TRUE(matches_torch("(a.mm(b), b.mv(c), c.dot(c), c.outer(c), c.diag(1), a.diagonal(), "
                            "a.trace(), a.unsqueeze(0).bmm(b.unsqueeze(0)))",
                            {x, m, vec}, [](const V& v) {
                              return V{v[0].mm(v[1]),      v[1].mv(v[2]),   v[2].dot(v[2]),
                                       v[2].outer(v[2]),   v[2].diag(1),    v[0].diagonal(),
                                       v[0].trace(),       v[0].unsqueeze(0).bmm(v[1].unsqueeze(0))};
                            }));
  // t() keeps 0-d and 1-D tensors, as PyTorch's.
  EXPECT_TRUE(matches_torch("(a.t(), b.t())", {make({2.0}), uniform({3})},
                            [](const V& v) { return V{v[0].t(), v[1].t()}; }));
}

TEST(TensorMethodsTorch, InPlaceForms) {
  Tensor index = Tensor::from_vector<int64_t>({2, 0, 1, 1}, {1, 4});
  Tensor x = uniform({3, 4}, -2, 2);
  Tensor y = x.clone();
  y.masked_fill_(y > 1, 9.0).scatter_(0, index, -5.0).scatter_add_(0, index, x.narrow(0, 0, 1));
  y.index_add_(1, index.reshape({4}), x, 0.5).index_fill_(0, index.narrow(1, 0, 1).reshape({1}), 4);
  y.scatter_reduce_(0, index, x.narrow(0, 1, 1), "prod");
  EXPECT_TRUE(matches_torch("a.clone().masked_fill_(a > 1, 9.0).scatter_(0, b, -5.0)"
                            ".scatter_add_(0, b, a[0:1]).index_add_(1, b[0], a, alpha=0.5)"
                            ".index_fill_(0, b[0, 0:1], 4).scatter_reduce_(0, b, a[1:2], 'prod')",
                            {x, index}, [&](const V&) { return y; }, {.grad = false}));
  Tensor z = uniform({5}, -2, 2);
  Tensor w = z.clone();
  w.floor_();
  Tensor u = z.clone();
  u.ceil_();
  Tensor r = z.clone();
  r.round_();
  Tensor q = z.clone();
  q.trunc_();
  EXPECT_TRUE(matches_torch("(a.clone().floor_(), a.clone().ceil_(), a.clone().round_(), "
                            "a.clone().trunc_())",
                            {z}, [&](const V&) { return V{w, u, r, q}; }, {.grad = false}));
  // A floating fill value is cast to an integer tensor's dtype, as PyTorch does.
  Tensor ints = Tensor::from_vector<int64_t>({1, 2}, {2});
  ints.masked_fill_(ints > 1, 7.5);
  EXPECT_EQ(ints.to_vector<int64_t>(), (std::vector<int64_t>{1, 7}));
}

}  // namespace
}  // namespace tessera::testing
