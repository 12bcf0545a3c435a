#pragma once

// Shared by the conv kernels (conv.cpp) and their oneDNN path
// (conv_dnnl.cpp, built when oneDNN is found). No oneDNN types here.

#include <cstdint>

namespace tessera {
class Workspace;
}  // namespace tessera

namespace tessera::cpu {

// One convolution problem, NCHW, weight [O, C / groups, kh, kw].
struct ConvGeometry {
  int64_t n, c, h, w, o, kh, kw, oh, ow;
  int64_t sh, sw, ph, pw, dh, dw, groups;

  int64_t group_channels() const { return c / groups; }
  int64_t group_outputs() const { return o / groups; }
  int64_t pixels() const { return oh * ow; }
  // Rows of one group's unfolded input: (channel, ky, kx).
  int64_t group_rows() const { return group_channels() * kh * kw; }
  // A 1x1 kernel with unit stride and no padding reads the input as it is.
  bool pointwise() const { return kh == 1 && kw == 1 && sh == 1 && sw == 1 && ph == 0 && pw == 0; }
};

#ifdef TESSERA_HAS_DNNL
// f32 convolution through oneDNN on dense NCHW buffers. Each returns false
// (having written nothing) when oneDNN has no implementation for the problem.
// The reordered operands and oneDNN's scratchpad come from `workspace`.
bool dnnl_conv_forward(const ConvGeometry& g, const float* x, const float* weight,
                       const float* bias, float* y, Workspace& workspace);
bool dnnl_conv_backward_data(const ConvGeometry& g, const float* grad_y, const float* weight,
                             float* grad_x, Workspace& workspace);
bool dnnl_conv_backward_weights(const ConvGeometry& g, const float* x, const float* grad_y,
                                float* grad_weight, Workspace& workspace);
#endif

}  // namespace tessera::cpu
