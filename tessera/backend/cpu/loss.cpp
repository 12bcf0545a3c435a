// CPU kernels for cross_entropy and cross_entropy_backward (ops/loss.cpp).
// Per sample: the log-sum-exp of its logits, then the NLL and
// label-smoothing terms (forward) or softmax minus the smoothed, weighted
// target (backward), without materialising log-probabilities. Samples of
// [N, C, d1...] inputs have their class values strided by d1 * ...; those
// are gathered into a contiguous scratch row.

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "tessera/backend/cpu/row_math.h"
#include "tessera/core/grad_mode.h"
#include "tessera/core/thread_pool.h"
#include "tessera/ops/op.h"

namespace tessera::cpu {

namespace {

constexpr int64_t kLossGrain = 16384;  // logits per parallel chunk

// The operands of either kernel, contiguous, with the sizes and options.
template <typename T>
struct Problem {
  Tensor logits, target, weight;
  const T* x = nullptr;
  const int64_t* labels = nullptr;
  const T* w = nullptr;  // null when unweighted
  int64_t classes = 0, inner = 1, samples = 0, ignore_index = 0;
  double smoothing = 0;
  double weight_total = 0;  // sum of class weights (classes when unweighted)

  // Validates targets; inputs are [logits, target, (weight)] from `first`.
  Problem(const KernelContext& ctx, size_t first) {
    const Attrs& attrs = ctx.attrs;
    NoGradGuard no_grad;
    logits = ctx.inputs[first];
    target = ctx.inputs[first + 1];
    if (attrs.b("has_weight")) weight = ctx.inputs[first + 2];
    classes = logits.shape()[1];
    samples = target.numel();
    inner = samples / std::max<int64_t>(logits.shape()[0], 1);
    ignore_index = attrs.i("ignore_index");
    smoothing = attrs.f("label_smoothing");
    if (samples == 0) return;
    x = logits.data<T>();
    labels = target.data<int64_t>();
    w = weight.defined() ? weight.data<T>() : nullptr;
    weight_total = w ? rows::sum(w, classes) : static_cast<double>(classes);
    for (int64_t s = 0; s < samples; ++s) {
      const int64_t t = labels[s];
      TESSERA_CHECK(t == ignore_index || (t >= 0 && t < classes), "[", ctx.op.name, "] target ", t,
                    " (at flat index ", s, ") is out of range for ", classes,
                    " classes; valid targets are 0..", classes - 1, " or ignore_index (",
                    ignore_index, ")");
    }
  }

  bool counted(int64_t s) const { return labels[s] != ignore_index; }
  double target_weight(int64_t s) const { return w ? static_cast<double>(w[labels[s]]) : 1.0; }
  // Summed weight of the counted targets: the divisor of "mean".
  double counted_weight() const {
    double total = 0;
    for (int64_t s = 0; s < samples; ++s) total += counted(s) ? target_weight(s) : 0.0;
    return total;
  }
  // Logits of sample s as a contiguous row (gathered into scratch if strided).
  const T* row(int64_t s, std::vector<T>& scratch) const {
    if (inner == 1) return x + s * classes;
    const T* base = x + (s / inner) * classes * inner + s % inner;
    for (int64_t c = 0; c < classes; ++c) scratch[c] = base[c * inner];
    return scratch.data();
  }
  int64_t grain() const { return std::max<int64_t>(1, kLossGrain / std::max<int64_t>(classes, 1)); }
};

// (1 - e) w_t (lse - x_t) + e / C (W lse - sum_c w_c x_c) for one sample.
template <typename T>
double sample_loss(const Problem<T>& p, const T* row, int64_t t) {
  const T shift = rows::max(row, p.classes);
  const double lse = static_cast<double>(shift) +
                     std::log(rows::exp_sum<T, false>(row, nullptr, p.classes, shift));
  const double target_weight = p.w ? static_cast<double>(p.w[t]) : 1.0;
  double loss = (1.0 - p.smoothing) * target_weight * (lse - static_cast<double>(row[t]));
  if (p.smoothing > 0) {
    const double weighted = p.w ? rows::dot(p.w, row, p.classes) : rows::sum(row, p.classes);
    loss += p.smoothing / static_cast<double>(p.classes) * (p.weight_total * lse - weighted);
  }
  return loss;
}

template <typename T>
void cross_entropy_impl(KernelContext& ctx) {
  Problem<T> p(ctx, 0);
  // Per-sample losses in double, reduced in a fixed order afterwards so that
  // results do not depend on the thread count.
  std::vector<double> losses(static_cast<size_t>(p.samples), 0.0);
  parallel_for(0, p.samples, p.grain(), [&](int64_t lo, int64_t hi) {
    std::vector<T> scratch(p.inner > 1 ? p.classes : 0);
    for (int64_t s = lo; s < hi; ++s) {
      if (p.counted(s)) losses[s] = sample_loss(p, p.row(s, scratch), p.labels[s]);
    }
  });
  T* out = ctx.outputs[0].data<T>();
  const std::string& reduction = ctx.attrs.get<std::string>("reduction");
  if (reduction == "none") {
    for (int64_t s = 0; s < p.samples; ++s) out[s] = static_cast<T>(losses[s]);
    return;
  }
  double total = 0;
  for (double loss : losses) total += loss;
  // An empty batch or all-ignored targets give 0 / 0 = NaN for "mean", as in PyTorch.
  out[0] = static_cast<T>(reduction == "sum" ? total : total / p.counted_weight());
}

// dlogits of one sample, scaled by `scale`, into out[0..classes):
// scale * (softmax * A - B), B = w * ((1 - e) onehot_t + e / C), A = sum(B).
template <typename T>
void sample_grad(const Problem<T>& p, const T* row, int64_t t, double scale, T* out) {
  const T shift = rows::max(row, p.classes);
  const double total = rows::exp_sum<T, true>(row, out, p.classes, shift);
  const double uniform = p.smoothing / static_cast<double>(p.classes);
  const double target_weight = p.w ? static_cast<double>(p.w[t]) : 1.0;
  const double a = (1.0 - p.smoothing) * target_weight + uniform * p.weight_total;
  const T factor = static_cast<T>(scale * a / total);
  const T offset = static_cast<T>(scale * uniform);
  if (p.w) {
    for (int64_t c = 0; c < p.classes; ++c) out[c] = factor * out[c] - offset * p.w[c];
  } else {
    for (int64_t c = 0; c < p.classes; ++c) out[c] = factor * out[c] - offset;
  }
  out[t] -= static_cast<T>(scale * (1.0 - p.smoothing) * target_weight);
}

template <typename T>
void cross_entropy_backward_impl(KernelContext& ctx) {
  Problem<T> p(ctx, 1);
  T* dx = ctx.outputs[0].data<T>();
  if (p.samples == 0 || p.classes == 0) return;
  NoGradGuard no_grad;
  const Tensor& grad = ctx.inputs[0];
  const T* g = grad.data<T>();
  const std::string& reduction = ctx.attrs.get<std::string>("reduction");
  const bool per_sample = reduction == "none";
  const double divisor = reduction == "mean" ? p.counted_weight() : 1.0;
  parallel_for(0, p.samples, p.grain(), [&](int64_t lo, int64_t hi) {
    std::vector<T> scratch(p.inner > 1 ? 2 * p.classes : 0);
    for (int64_t s = lo; s < hi; ++s) {
      T* out = p.inner == 1 ? dx + s * p.classes : scratch.data() + p.classes;
      if (p.counted(s)) {
        const double scale = static_cast<double>(g[per_sample ? s : 0]) / divisor;
        sample_grad(p, p.row(s, scratch), p.labels[s], scale, out);
      } else {
        std::fill(out, out + p.classes, T(0));
      }
      if (p.inner > 1) {
        T* base = dx + (s / p.inner) * p.classes * p.inner + s % p.inner;
        for (int64_t c = 0; c < p.classes; ++c) base[c * p.inner] = out[c];
      }
    }
  });
}

void cross_entropy_kernel(KernelContext& ctx) {
  TESSERA_DISPATCH_FLOATING(ctx.inputs[0].dtype(), "cross_entropy",
                            [&] { cross_entropy_impl<scalar_t>(ctx); });
}

void cross_entropy_backward_kernel(KernelContext& ctx) {
  TESSERA_DISPATCH_FLOATING(ctx.inputs[1].dtype(), "cross_entropy_backward",
                            [&] { cross_entropy_backward_impl<scalar_t>(ctx); });
}

TESSERA_REGISTER_KERNEL("cross_entropy", cpu, cross_entropy_kernel, ::tessera::DType::f32,
                        ::tessera::DType::f64);
TESSERA_REGISTER_KERNEL("cross_entropy_backward", cpu, cross_entropy_backward_kernel,
                        ::tessera::DType::f32, ::tessera::DType::f64);

}  // namespace

}  // namespace tessera::cpu
