// CPU kernel for cross_entropy (ops/loss.cpp): per sample, log-sum-exp of
// the logits and the NLL / label-smoothing terms, without materialising the
// log-probabilities. Samples of [N, C, d1...] inputs have their class values
// strided by d1 * ...; those are gathered into a contiguous scratch row.

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

struct LossParams {
  int64_t classes;
  double smoothing;
  double weight_total;  // sum of class weights (classes when unweighted)
};

// Loss of one sample whose logits are row[0..classes), target class t:
// (1 - e) w_t (lse - x_t) + e / C (W lse - sum_c w_c x_c).
template <typename T>
double sample_loss(const T* row, int64_t t, const T* weight, const LossParams& p) {
  const T shift = rows::max(row, p.classes);
  const double lse =
      static_cast<double>(shift) + std::log(rows::exp_sum<T, false>(row, nullptr, p.classes, shift));
  const double target_weight = weight ? static_cast<double>(weight[t]) : 1.0;
  double loss = (1.0 - p.smoothing) * target_weight * (lse - static_cast<double>(row[t]));
  if (p.smoothing > 0) {
    const double weighted = weight ? rows::dot(weight, row, p.classes) : rows::sum(row, p.classes);
    loss += p.smoothing / static_cast<double>(p.classes) * (p.weight_total * lse - weighted);
  }
  return loss;
}

template <typename T>
void cross_entropy_impl(KernelContext& ctx) {
  const Attrs& attrs = ctx.attrs;
  NoGradGuard no_grad;
  const Tensor logits = ctx.inputs[0].contiguous();
  const Tensor target = ctx.inputs[1].contiguous();
  const bool has_weight = attrs.b("has_weight");
  const Tensor weight = has_weight ? ctx.inputs[2].contiguous() : Tensor();
  const int64_t ignore_index = attrs.i("ignore_index");
  const std::string& reduction = attrs.get<std::string>("reduction");

  const int64_t classes = logits.shape()[1];
  const int64_t inner = logits.numel() / std::max<int64_t>(logits.shape()[0] * classes, 1);
  const int64_t samples = target.numel();
  const int64_t* labels = samples > 0 ? target.data<int64_t>() : nullptr;
  for (int64_t s = 0; s < samples; ++s) {
    const int64_t t = labels[s];
    TESSERA_CHECK(t == ignore_index || (t >= 0 && t < classes), "[cross_entropy] target ", t,
                  " (at flat index ", s, ") is out of range for ", classes,
                  " classes; valid targets are 0..", classes - 1, " or ignore_index (",
                  ignore_index, ")");
  }
  const T* pw = has_weight ? weight.data<T>() : nullptr;
  LossParams params{classes, attrs.f("label_smoothing"),
                    has_weight ? rows::sum(pw, classes) : static_cast<double>(classes)};

  // Per-sample losses and counted weights in double, reduced in a fixed
  // order afterwards so results do not depend on the thread count.
  std::vector<double> losses(static_cast<size_t>(samples), 0.0);
  std::vector<double> counted(static_cast<size_t>(samples), 0.0);
  const T* px = samples > 0 ? logits.data<T>() : nullptr;
  const int64_t grain = std::max<int64_t>(1, kLossGrain / std::max<int64_t>(classes, 1));
  parallel_for(0, samples, grain, [&](int64_t lo, int64_t hi) {
    std::vector<T> scratch(inner > 1 ? classes : 0);
    for (int64_t s = lo; s < hi; ++s) {
      const int64_t t = labels[s];
      if (t == ignore_index) continue;
      const T* row;
      if (inner == 1) {
        row = px + s * classes;
      } else {
        const T* base = px + (s / inner) * classes * inner + s % inner;
        for (int64_t c = 0; c < classes; ++c) scratch[c] = base[c * inner];
        row = scratch.data();
      }
      losses[s] = sample_loss(row, t, pw, params);
      counted[s] = has_weight ? static_cast<double>(pw[t]) : 1.0;
    }
  });

  T* out = ctx.outputs[0].data<T>();
  if (reduction == "none") {
    for (int64_t s = 0; s < samples; ++s) out[s] = static_cast<T>(losses[s]);
    return;
  }
  double total = 0, divisor = 0;
  for (int64_t s = 0; s < samples; ++s) {
    total += losses[s];
    divisor += counted[s];
  }
  // An empty batch or all-ignored targets give 0 / 0 = NaN for "mean", as in PyTorch.
  out[0] = static_cast<T>(reduction == "sum" ? total : total / divisor);
}

void cross_entropy_kernel(KernelContext& ctx) {
  TESSERA_DISPATCH_FLOATING(ctx.inputs[0].dtype(), "cross_entropy",
                            [&] { cross_entropy_impl<scalar_t>(ctx); });
}

TESSERA_REGISTER_KERNEL("cross_entropy", cpu, cross_entropy_kernel, ::tessera::DType::f32,
                        ::tessera::DType::f64);

}  // namespace

}  // namespace tessera::cpu
