// conv1d, conv3d, string padding, unbatched inputs and transposed
// convolution, against convolution written out as loops over any number of
// spatial dims.

#include "testing.h"

namespace tessera::testing {
namespace {

using Ints = std::vector<int64_t>;

// Calls fn(index) for every multi-index below `sizes`.
template <typename Fn>
void for_each_index(const Ints& sizes, Fn&& fn) {
  for (int64_t s : sizes) {
    if (s == 0) return;
  }
  Ints index(sizes.size(), 0);
  while (true) {
    fn(index);
    size_t d = sizes.size();
    while (d > 0) {
      --d;
      if (++index[d] < sizes[d]) break;
      index[d] = 0;
      if (d == 0) return;
    }
    if (sizes.empty()) return;
  }
}

int64_t flat(const Ints& index, const Ints& sizes) {
  int64_t out = 0;
  for (size_t d = 0; d < sizes.size(); ++d) out = out * sizes[d] + index[d];
  return out;
}

struct NdConv {
  Shape x, w;  // batched: [N, C, spatial...], [O, C / groups, kernel...]
  Ints stride, pad_before, dilation;
  int64_t groups;
  bool bias;
  Ints out_spatial;  // empty: from the usual formula with symmetric padding
};

Ints spatial_out(const NdConv& c) {
  if (!c.out_spatial.empty()) return c.out_spatial;
  Ints out;
  for (size_t d = 0; d + 2 < c.x.size(); ++d) {
    out.push_back((c.x[d + 2] + 2 * c.pad_before[d] - c.dilation[d] * (c.w[d + 2] - 1) - 1) /
                      c.stride[d] + 1);
  }
  return out;
}

// The definition, with taps outside the input reading zero.
std::vector<double> naive_conv(const NdConv& c, const Tensor& x, const Tensor& w, const Tensor& b,
                               Shape& out_shape) {
  const std::vector<double> vx = x.to_vector<double>(), vw = w.to_vector<double>();
  const Ints in_sp(c.x.begin() + 2, c.x.end()), k_sp(c.w.begin() + 2, c.w.end());
  const Ints out_sp = spatial_out(c);
  const int64_t n = c.x[0], ch = c.x[1], o = c.w[0], cg = c.w[1], og = o / c.groups;
  out_shape = {n, o};
  out_shape.insert(out_shape.end(), out_sp.begin(), out_sp.end());
  std::vector<double> out(numel(out_shape), 0.0);
  std::vector<double> vb = b.defined() ? b.to_vector<double>() : std::vector<double>(o, 0.0);
  for (int64_t bi = 0; bi < n; ++bi) {
    for (int64_t oc = 0; oc < o; ++oc) {
      for_each_index(out_sp, [&](const Ints& pos) {
        double total = vb[oc];
        for (int64_t ic = 0; ic < cg; ++ic) {
          const int64_t channel = (oc / og) * cg + ic;
          for_each_index(k_sp, [&](const Ints& tap) {
            Ints at(pos.size());
            for (size_t d = 0; d < pos.size(); ++d) {
              at[d] = pos[d] * c.stride[d] - c.pad_before[d] + tap[d] * c.dilation[d];
              if (at[d] < 0 || at[d] >= in_sp[d]) return;
            }
            total += vx[(bi * ch + channel) * numel(in_sp) + flat(at, in_sp)] *
                     vw[(oc * cg + ic) * numel(k_sp) + flat(tap, k_sp)];
          });
        }
        out[(bi * o + oc) * numel(out_sp) + flat(pos, out_sp)] = total;
      });
    }
  }
  return out;
}

const NdConv k1d[] = {
    {{2, 3, 9}, {4, 3, 3}, {1}, {1}, {1}, 1, true, {}},
    {{1, 4, 10}, {6, 2, 2}, {2}, {0}, {2}, 2, false, {}},
    {{2, 2, 7}, {2, 2, 1}, {3}, {2}, {1}, 1, true, {}},
};

const NdConv k3d[] = {
    {{2, 2, 4, 5, 4}, {3, 2, 2, 3, 2}, {1, 1, 1}, {0, 1, 1}, {1, 1, 1}, 1, true, {}},
    {{1, 4, 6, 5, 5}, {4, 2, 3, 2, 2}, {2, 1, 2}, {1, 0, 1}, {1, 2, 1}, 2, false, {}},
    {{1, 1, 3, 3, 3}, {2, 1, 1, 1, 1}, {1, 1, 1}, {0, 0, 0}, {1, 1, 1}, 1, true, {}},
};

Tensor bias_for(const NdConv& c, uint64_t seed) {
  return c.bias ? uniform({c.w[0]}, -1, 1, seed) : Tensor();
}

TEST(Conv1d, ForwardMatchesLoopsBatchedAndNot) {
  for (const NdConv& c : k1d) {
    SCOPED_TRACE(shape_str(c.x) + " * " + shape_str(c.w));
    Tensor x = uniform(c.x, -1, 1, 1), w = uniform(c.w, -1, 1, 2), b = bias_for(c, 3);
    Shape shape;
    std::vector<double> want = naive_conv(c, x, w, b, shape);
    Tensor y = conv1d(x, w, b, c.stride, c.pad_before, c.dilation, c.groups);
    EXPECT_EQ(y.shape(), shape);
    EXPECT_TRUE(all_close(y, want, 1e-12, 1e-12));
    Tensor y32 = conv1d(x.to(DType::f32), w.to(DType::f32), b.defined() ? b.to(DType::f32) : b,
                        c.stride[0], c.pad_before[0], c.dilation[0], c.groups);
    EXPECT_TRUE(all_close(y32, want, 1e-5, 1e-5));
    // Unbatched: the first image alone.
    Tensor single = conv1d(x.select(0, 0), w, b, c.stride, c.pad_before, c.dilation, c.groups);
    EXPECT_EQ(single.shape(), Shape(shape.begin() + 1, shape.end()));
    EXPECT_TRUE(all_close(single, y.select(0, 0), 1e-12, 1e-12));
  }
}

TEST(Conv3d, ForwardMatchesLoopsBatchedAndNot) {
  for (const NdConv& c : k3d) {
    SCOPED_TRACE(shape_str(c.x) + " * " + shape_str(c.w));
    Tensor x = uniform(c.x, -1, 1, 1), w = uniform(c.w, -1, 1, 2), b = bias_for(c, 3);
    Shape shape;
    std::vector<double> want = naive_conv(c, x, w, b, shape);
    Tensor y = conv3d(x, w, b, c.stride, c.pad_before, c.dilation, c.groups);
    EXPECT_EQ(y.shape(), shape);
    EXPECT_TRUE(all_close(y, want, 1e-12, 1e-12));
    Tensor single = conv3d(x.select(0, 0), w, b, c.stride, c.pad_before, c.dilation, c.groups);
    EXPECT_TRUE(all_close(single, y.select(0, 0), 1e-12, 1e-12));
  }
  EXPECT_EQ(conv3d(zeros({0, 2, 3, 3, 3}), zeros({4, 2, 2, 2, 2}), {}, 1).shape(),
            (Shape{0, 4, 2, 2, 2}));
}

TEST(Conv2d, UnbatchedInputIsOneImage) {
  Tensor x = uniform({3, 6, 5}, -1, 1, 1), w = uniform({4, 3, 3, 2}, -1, 1, 2);
  Tensor b = uniform({4}, -1, 1, 3);
  Tensor y = conv2d(x, w, b, {2, 1}, {1, 0});
  EXPECT_EQ(y.shape(), (Shape{4, 3, 4}));
  EXPECT_TRUE(all_close(y, conv2d(x.unsqueeze(0), w, b, {2, 1}, {1, 0}).squeeze(0), 1e-12, 1e-12));
}

// "same" pads dilation * (k - 1) in total, the odd element after.
TEST(ConvStringPadding, SameKeepsTheSizeAndValidPadsNothing) {
  struct Case {
    Shape x, w;
    Ints dilation;
  };
  const Case cases[] = {
      {{2, 2, 5, 6}, {3, 2, 3, 3}, {1, 1}},
      {{1, 2, 5, 6}, {3, 2, 2, 4}, {1, 1}},  // even kernels: asymmetric
      {{1, 2, 7, 6}, {2, 2, 2, 3}, {3, 2}},
  };
  for (const Case& k : cases) {
    SCOPED_TRACE(shape_str(k.x) + " * " + shape_str(k.w));
    Tensor x = uniform(k.x, -1, 1, 1), w = uniform(k.w, -1, 1, 2), b = uniform({k.w[0]}, -1, 1, 3);
    Ints before;
    for (int d = 0; d < 2; ++d) before.push_back(k.dilation[d] * (k.w[2 + d] - 1) / 2);
    NdConv c{k.x, k.w, {1, 1}, before, k.dilation, 1, true, {k.x[2], k.x[3]}};
    Shape shape;
    std::vector<double> want = naive_conv(c, x, w, b, shape);
    Tensor y = conv2d(x, w, b, {1, 1}, "same", k.dilation);
    EXPECT_EQ(y.shape(), shape);
    EXPECT_TRUE(all_close(y, want, 1e-12, 1e-12));
    EXPECT_TRUE(gradcheck(
        [&](const std::vector<Tensor>& in) {
          return conv2d(in[0], in[1], in[2], {1, 1}, "same", k.dilation);
        },
        {x.detach().set_requires_grad(), w.detach().set_requires_grad(),
         b.detach().set_requires_grad()}));
    EXPECT_TRUE(all_close(conv2d(x, w, b, 1, "valid", 1),
                          conv2d(x, w, b, {1, 1}, {0, 0}), 1e-12, 1e-12));
  }
  // conv1d and conv3d take the same strings.
  Tensor x1 = uniform({2, 3, 7}, -1, 1, 4), w1 = uniform({2, 3, 4}, -1, 1, 5);
  NdConv c1{{2, 3, 7}, {2, 3, 4}, {1}, {1}, {1}, 1, false, {7}};
  Shape shape;
  EXPECT_TRUE(all_close(conv1d(x1, w1, {}, 1, "same"), naive_conv(c1, x1, w1, {}, shape), 1e-12,
                        1e-12));
  Tensor x3 = uniform({1, 2, 4, 5, 3}, -1, 1, 6), w3 = uniform({2, 2, 2, 3, 2}, -1, 1, 7);
  NdConv c3{{1, 2, 4, 5, 3}, {2, 2, 2, 3, 2}, {1, 1, 1}, {0, 1, 0}, {1, 1, 1}, 1, false, {4, 5, 3}};
  EXPECT_TRUE(all_close(conv3d(x3, w3, {}, 1, "same"), naive_conv(c3, x3, w3, {}, shape), 1e-12,
                        1e-12));
  EXPECT_HAS(error_of([&] { conv2d(zeros({1, 2, 5, 5}), zeros({3, 2, 3, 3}), {}, 2, "same"); }),
             "[conv2d] padding=\"same\" needs stride 1");
  EXPECT_HAS(error_of([&] { conv2d(zeros({1, 2, 5, 5}), zeros({3, 2, 3, 3}), {}, 1, "full"); }),
             "[conv2d] padding \"full\" is unknown");
}

struct TransposeCase {
  Shape x, w;  // x [N, C_in, H, W], w [C_in, C_out / groups, kh, kw]
  Ints stride, padding, output_padding, dilation;
  int64_t groups;
  bool bias;
};

const TransposeCase kTransposeCases[] = {
    {{2, 3, 4, 5}, {3, 2, 3, 3}, {1, 1}, {0, 0}, {0, 0}, {1, 1}, 1, true},
    {{1, 4, 5, 5}, {4, 3, 3, 3}, {2, 2}, {1, 1}, {1, 1}, {1, 1}, 2, true},
    {{1, 2, 3, 4}, {2, 2, 3, 2}, {1, 2}, {0, 1}, {1, 0}, {2, 1}, 1, false},  // op >= stride
    {{2, 2, 3, 3}, {2, 1, 2, 2}, {3, 2}, {1, 0}, {2, 1}, {1, 1}, 2, true},
};

// Each input element scatters weight-scaled copies into the output.
std::vector<double> naive_transpose(const TransposeCase& c, const Tensor& x, const Tensor& w,
                                    const Tensor& b, Shape& out_shape) {
  const std::vector<double> vx = x.to_vector<double>(), vw = w.to_vector<double>();
  const int64_t n = c.x[0], cin = c.x[1], h = c.x[2], wd = c.x[3];
  const int64_t cog = c.w[1], kh = c.w[2], kw = c.w[3], cout = cog * c.groups;
  const int64_t cig = cin / c.groups;
  Ints size(2);
  for (int d = 0; d < 2; ++d) {
    size[d] = (c.x[2 + d] - 1) * c.stride[d] - 2 * c.padding[d] +
              c.dilation[d] * (c.w[2 + d] - 1) + c.output_padding[d] + 1;
  }
  out_shape = {n, cout, size[0], size[1]};
  std::vector<double> out(numel(out_shape), 0.0);
  for (int64_t bi = 0; bi < n; ++bi)
    for (int64_t oc = 0; oc < cout; ++oc)
      for (int64_t y = 0; y < size[0] * size[1]; ++y)
        out[(bi * cout + oc) * size[0] * size[1] + y] = b.defined() ? b.to_vector<double>()[oc] : 0;
  for (int64_t bi = 0; bi < n; ++bi)
    for (int64_t ic = 0; ic < cin; ++ic)
      for (int64_t iy = 0; iy < h; ++iy)
        for (int64_t ix = 0; ix < wd; ++ix)
          for (int64_t j = 0; j < cog; ++j)
            for (int64_t ky = 0; ky < kh; ++ky)
              for (int64_t kx = 0; kx < kw; ++kx) {
                const int64_t oy = iy * c.stride[0] - c.padding[0] + ky * c.dilation[0];
                const int64_t ox = ix * c.stride[1] - c.padding[1] + kx * c.dilation[1];
                if (oy < 0 || oy >= size[0] || ox < 0 || ox >= size[1]) continue;
                const int64_t oc = (ic / cig) * cog + j;
                out[((bi * cout + oc) * size[0] + oy) * size[1] + ox] +=
                    vx[((bi * cin + ic) * h + iy) * wd + ix] * vw[((ic * cog + j) * kh + ky) * kw + kx];
              }
  return out;
}

TEST(ConvTranspose2d, ForwardMatchesLoops) {
  for (const TransposeCase& c : kTransposeCases) {
    SCOPED_TRACE(shape_str(c.x) + " * " + shape_str(c.w));
    Tensor x = uniform(c.x, -1, 1, 1), w = uniform(c.w, -1, 1, 2);
    Tensor b = c.bias ? uniform({c.w[1] * c.groups}, -1, 1, 3) : Tensor();
    Shape shape;
    std::vector<double> want = naive_transpose(c, x, w, b, shape);
    Tensor y = conv_transpose2d(x, w, b, c.stride, c.padding, c.output_padding, c.groups,
                                c.dilation);
    EXPECT_EQ(y.shape(), shape);
    EXPECT_TRUE(all_close(y, want, 1e-12, 1e-12));
    Tensor y32 = conv_transpose2d(x.to(DType::f32), w.to(DType::f32),
                                  b.defined() ? b.to(DType::f32) : b, c.stride, c.padding,
                                  c.output_padding, c.groups, c.dilation);
    EXPECT_TRUE(all_close(y32, want, 1e-5, 1e-5));
    Tensor single = conv_transpose2d(x.select(0, 0), w, b, c.stride, c.padding, c.output_padding,
                                     c.groups, c.dilation);
    EXPECT_TRUE(all_close(single, y.select(0, 0), 1e-12, 1e-12));
  }
}

TEST(ConvTranspose2d, GradientsMatchFiniteDifferences) {
  for (const TransposeCase& c : kTransposeCases) {
    SCOPED_TRACE(shape_str(c.x) + " * " + shape_str(c.w));
    std::vector<Tensor> inputs = {uniform(c.x, -1, 1, 1).set_requires_grad(),
                                  uniform(c.w, -1, 1, 2).set_requires_grad()};
    if (c.bias) inputs.push_back(uniform({c.w[1] * c.groups}, -1, 1, 3).set_requires_grad());
    auto fn = [c](const std::vector<Tensor>& in) {
      return conv_transpose2d(in[0], in[1], in.size() == 3 ? in[2] : Tensor(), c.stride,
                              c.padding, c.output_padding, c.groups, c.dilation);
    };
    EXPECT_TRUE(gradcheck(fn, inputs));
  }
}

TEST(ConvTranspose1d, IsConvTranspose2dOverAHeightOfOne) {
  Tensor x = uniform({2, 4, 6}, -1, 1, 1), w = uniform({4, 3, 3}, -1, 1, 2);
  Tensor b = uniform({6}, -1, 1, 3);
  Tensor y = conv_transpose1d(x, w, b, 2, 1, 1, 2);
  Tensor want = conv_transpose2d(x.unsqueeze(2), w.unsqueeze(2), b, {1, 2}, {0, 1}, {0, 1}, 2);
  EXPECT_EQ(y.shape(), (Shape{2, 6, 12}));
  EXPECT_TRUE(all_close(y, want.squeeze(2), 1e-12, 1e-12));
}

TEST(ConvNd, GradientsMatchFiniteDifferences) {
  for (const NdConv& c : k1d) {
    SCOPED_TRACE(shape_str(c.x) + " * " + shape_str(c.w));
    std::vector<Tensor> inputs = {uniform(c.x, -1, 1, 1).set_requires_grad(),
                                  uniform(c.w, -1, 1, 2).set_requires_grad()};
    if (c.bias) inputs.push_back(uniform({c.w[0]}, -1, 1, 3).set_requires_grad());
    EXPECT_TRUE(gradcheck(
        [c](const std::vector<Tensor>& in) {
          return conv1d(in[0], in[1], in.size() == 3 ? in[2] : Tensor(), c.stride, c.pad_before,
                        c.dilation, c.groups);
        },
        inputs));
  }
  for (const NdConv& c : k3d) {
    SCOPED_TRACE(shape_str(c.x) + " * " + shape_str(c.w));
    std::vector<Tensor> inputs = {uniform(c.x, -1, 1, 1).set_requires_grad(),
                                  uniform(c.w, -1, 1, 2).set_requires_grad()};
    if (c.bias) inputs.push_back(uniform({c.w[0]}, -1, 1, 3).set_requires_grad());
    EXPECT_TRUE(gradcheck(
        [c](const std::vector<Tensor>& in) {
          return conv3d(in[0], in[1], in.size() == 3 ? in[2] : Tensor(), c.stride, c.pad_before,
                        c.dilation, c.groups);
        },
        inputs));
  }
}

TEST(ConvNd, ErrorsNameTheOp) {
  EXPECT_HAS(error_of([] { conv1d(zeros({2, 3, 4, 5}), zeros({2, 3, 3})); }),
             "[conv1d] input must be 2-D");
  EXPECT_HAS(error_of([] { conv1d(zeros({2, 3, 5}), zeros({2, 3, 3, 1})); }),
             "[conv1d] weight must be 3-D");
  EXPECT_HAS(error_of([] { conv3d(zeros({1, 3, 4, 4, 4}), zeros({2, 2, 3, 3, 3})); }),
             "[conv3d] input has 3 channels");
  EXPECT_HAS(error_of([] { conv3d(zeros({1, 2, 2, 4, 4}), zeros({2, 2, 3, 3, 3})); }),
             "[conv3d] kernel");
  EXPECT_HAS(error_of([] {
               conv_transpose2d(zeros({1, 2, 3, 3}), zeros({2, 2, 3, 3}), {}, 2, 0, 2);
             }),
             "[conv_transpose2d] output_padding");
  EXPECT_HAS(error_of([] { conv_transpose2d(zeros({1, 3, 3, 3}), zeros({2, 2, 3, 3})); }),
             "[conv_transpose2d] input has 3 channels");
  EXPECT_HAS(error_of([] {
               conv_transpose2d(zeros({1, 2, 1, 1}), zeros({2, 2, 1, 1}), {}, 1, 1);
             }),
             "[conv_transpose2d]");
}

}  // namespace
}  // namespace tessera::testing
