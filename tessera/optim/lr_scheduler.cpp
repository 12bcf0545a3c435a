#include "tessera/optim/lr_scheduler.h"

#include <algorithm>
#include <cmath>

#include "tessera/core/grad_mode.h"

namespace tessera::optim {

LRScheduler::LRScheduler(Optimizer& optimizer, std::string name)
    : optimizer_(optimizer), name_(std::move(name)) {
  for (size_t group = 0; group < optimizer.num_param_groups(); ++group)
    base_lrs_.push_back(optimizer.lr(group));
}

void LRScheduler::apply() {
  for (size_t group = 0; group < base_lrs_.size(); ++group)
    optimizer_.set_lr(lr_at(last_epoch_, base_lrs_[group]), group);
}

void LRScheduler::step() {
  ++last_epoch_;
  apply();
}

void LRScheduler::set_epoch(int64_t epoch) {
  TESSERA_CHECK(epoch >= 0, "[", name_, "] epoch must be non-negative, got ", epoch);
  last_epoch_ = epoch;
  apply();
}

std::vector<double> LRScheduler::get_last_lr() const {
  std::vector<double> lrs;
  for (size_t group = 0; group < base_lrs_.size(); ++group) lrs.push_back(optimizer_.lr(group));
  return lrs;
}

StateDict LRScheduler::state_dict() const {
  StateDict out;
  out.insert("last_epoch", Tensor::scalar(static_cast<double>(last_epoch_), DType::i64));
  out.insert("base_lrs", Tensor::from_vector(base_lrs_, {static_cast<int64_t>(base_lrs_.size())}));
  return out;
}

void LRScheduler::load_state_dict(const StateDict& state) {
  for (const auto& [key, value] : state) {
    TESSERA_CHECK(key == "last_epoch" || key == "base_lrs", "[", name_,
                  ".load_state_dict] unexpected key '", key,
                  "'; expected 'last_epoch' and 'base_lrs'");
  }
  for (const char* key : {"last_epoch", "base_lrs"}) {
    TESSERA_CHECK(state.contains(key), "[", name_, ".load_state_dict] missing key '", key, "'");
  }
  const Tensor& epoch = state.at("last_epoch");
  TESSERA_CHECK(epoch.numel() == 1, "[", name_,
                ".load_state_dict] 'last_epoch' must hold one value, got shape ",
                shape_str(epoch.shape()));
  const int64_t last_epoch = epoch.item<int64_t>();
  TESSERA_CHECK(last_epoch >= 0, "[", name_, ".load_state_dict] 'last_epoch' is ", last_epoch,
                "; it must be non-negative");
  const Tensor& lrs = state.at("base_lrs");
  TESSERA_CHECK(lrs.dim() == 1 && static_cast<size_t>(lrs.numel()) == base_lrs_.size(), "[",
                name_, ".load_state_dict] 'base_lrs' has shape ", shape_str(lrs.shape()),
                " but the optimizer has ", base_lrs_.size(), " parameter group(s)");
  NoGradGuard no_grad;
  base_lrs_ = lrs.to(DType::f64).contiguous().to_vector<double>();
  last_epoch_ = last_epoch;
  apply();
}

StepLR::StepLR(Optimizer& optimizer, int64_t step_size, double gamma)
    : LRScheduler(optimizer, "StepLR"), step_size_(step_size), gamma_(gamma) {
  TESSERA_CHECK(step_size > 0, "[StepLR] step_size must be positive, got ", step_size);
  apply();
}

double StepLR::lr_at(int64_t epoch, double base_lr) const {
  return base_lr * std::pow(gamma_, static_cast<double>(epoch / step_size_));
}

CosineAnnealingLR::CosineAnnealingLR(Optimizer& optimizer, int64_t t_max, double eta_min)
    : LRScheduler(optimizer, "CosineAnnealingLR"), t_max_(t_max), eta_min_(eta_min) {
  TESSERA_CHECK(t_max > 0, "[CosineAnnealingLR] t_max must be positive, got ", t_max);
  apply();
}

double CosineAnnealingLR::lr_at(int64_t epoch, double base_lr) const {
  const double progress = static_cast<double>(epoch) / static_cast<double>(t_max_);
  return eta_min_ + (base_lr - eta_min_) * (1.0 + std::cos(M_PI * progress)) / 2.0;
}

LinearWarmupCosine::LinearWarmupCosine(Optimizer& optimizer, int64_t warmup_steps,
                                       int64_t total_steps, double min_lr)
    : LRScheduler(optimizer, "LinearWarmupCosine"),
      warmup_steps_(warmup_steps),
      total_steps_(total_steps),
      min_lr_(min_lr) {
  TESSERA_CHECK(warmup_steps >= 0 && total_steps > warmup_steps,
                "[LinearWarmupCosine] needs 0 <= warmup_steps < total_steps, got warmup_steps=",
                warmup_steps, ", total_steps=", total_steps);
  apply();
}

double LinearWarmupCosine::lr_at(int64_t epoch, double base_lr) const {
  if (epoch < warmup_steps_)
    return base_lr * static_cast<double>(epoch + 1) / static_cast<double>(warmup_steps_);
  if (epoch >= total_steps_) return min_lr_;
  const double progress = static_cast<double>(epoch - warmup_steps_) /
                          static_cast<double>(total_steps_ - warmup_steps_);
  return min_lr_ + (base_lr - min_lr_) * (1.0 + std::cos(M_PI * progress)) / 2.0;
}

MultiStepLR::MultiStepLR(Optimizer& optimizer, std::vector<int64_t> milestones, double gamma)
    : LRScheduler(optimizer, "MultiStepLR"), milestones_(std::move(milestones)), gamma_(gamma) {
  for (size_t i = 0; i < milestones_.size(); ++i) {
    TESSERA_CHECK(milestones_[i] >= 0 && (i == 0 || milestones_[i] > milestones_[i - 1]),
                  "[MultiStepLR] milestones must be non-negative and increasing; milestone ", i,
                  " is ", milestones_[i], i == 0 ? "" : " after ",
                  i == 0 ? "" : std::to_string(milestones_[i - 1]));
  }
  apply();
}

double MultiStepLR::lr_at(int64_t epoch, double base_lr) const {
  const auto passed = std::upper_bound(milestones_.begin(), milestones_.end(), epoch) -
                      milestones_.begin();
  return base_lr * std::pow(gamma_, static_cast<double>(passed));
}

ExponentialLR::ExponentialLR(Optimizer& optimizer, double gamma)
    : LRScheduler(optimizer, "ExponentialLR"), gamma_(gamma) {
  apply();
}

double ExponentialLR::lr_at(int64_t epoch, double base_lr) const {
  return base_lr * std::pow(gamma_, static_cast<double>(epoch));
}

LinearLR::LinearLR(Optimizer& optimizer, double start_factor, double end_factor,
                   int64_t total_iters)
    : LRScheduler(optimizer, "LinearLR"),
      start_factor_(start_factor),
      end_factor_(end_factor),
      total_iters_(total_iters) {
  TESSERA_CHECK(start_factor > 0.0 && start_factor <= 1.0, "[LinearLR] start_factor must be in "
                "(0, 1], got ", start_factor);
  TESSERA_CHECK(end_factor >= 0.0 && end_factor <= 1.0, "[LinearLR] end_factor must be in "
                "[0, 1], got ", end_factor);
  TESSERA_CHECK(total_iters > 0, "[LinearLR] total_iters must be positive, got ", total_iters);
  apply();
}

double LinearLR::lr_at(int64_t epoch, double base_lr) const {
  const double progress =
      static_cast<double>(std::min(epoch, total_iters_)) / static_cast<double>(total_iters_);
  return base_lr * (start_factor_ + (end_factor_ - start_factor_) * progress);
}

ConstantLR::ConstantLR(Optimizer& optimizer, double factor, int64_t total_iters)
    : LRScheduler(optimizer, "ConstantLR"), factor_(factor), total_iters_(total_iters) {
  TESSERA_CHECK(factor >= 0.0 && factor <= 1.0, "[ConstantLR] factor must be in [0, 1], got ",
                factor);
  TESSERA_CHECK(total_iters >= 0, "[ConstantLR] total_iters must be non-negative, got ",
                total_iters);
  apply();
}

double ConstantLR::lr_at(int64_t epoch, double base_lr) const {
  return epoch < total_iters_ ? base_lr * factor_ : base_lr;
}

LambdaLR::LambdaLR(Optimizer& optimizer, std::function<double(int64_t)> factor)
    : LRScheduler(optimizer, "LambdaLR"), factor_(std::move(factor)) {
  TESSERA_CHECK(static_cast<bool>(factor_), "[LambdaLR] needs a factor function");
  apply();
}

double LambdaLR::lr_at(int64_t epoch, double base_lr) const { return base_lr * factor_(epoch); }

}  // namespace tessera::optim
