#include "tessera/optim/lr_scheduler.h"

#include <cmath>

namespace tessera::optim {

LRScheduler::LRScheduler(Optimizer& optimizer) : optimizer_(optimizer) {
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
  TESSERA_CHECK(epoch >= 0, "[LRScheduler] epoch must be non-negative, got ", epoch);
  last_epoch_ = epoch;
  apply();
}

std::vector<double> LRScheduler::get_last_lr() const {
  std::vector<double> lrs;
  for (size_t group = 0; group < base_lrs_.size(); ++group) lrs.push_back(optimizer_.lr(group));
  return lrs;
}

StepLR::StepLR(Optimizer& optimizer, int64_t step_size, double gamma)
    : LRScheduler(optimizer), step_size_(step_size), gamma_(gamma) {
  TESSERA_CHECK(step_size > 0, "[StepLR] step_size must be positive, got ", step_size);
  apply();
}

double StepLR::lr_at(int64_t epoch, double base_lr) const {
  return base_lr * std::pow(gamma_, static_cast<double>(epoch / step_size_));
}

CosineAnnealingLR::CosineAnnealingLR(Optimizer& optimizer, int64_t t_max, double eta_min)
    : LRScheduler(optimizer), t_max_(t_max), eta_min_(eta_min) {
  TESSERA_CHECK(t_max > 0, "[CosineAnnealingLR] t_max must be positive, got ", t_max);
  apply();
}

double CosineAnnealingLR::lr_at(int64_t epoch, double base_lr) const {
  const double progress = static_cast<double>(epoch) / static_cast<double>(t_max_);
  return eta_min_ + (base_lr - eta_min_) * (1.0 + std::cos(M_PI * progress)) / 2.0;
}

LinearWarmupCosine::LinearWarmupCosine(Optimizer& optimizer, int64_t warmup_steps,
                                       int64_t total_steps, double min_lr)
    : LRScheduler(optimizer),
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

LambdaLR::LambdaLR(Optimizer& optimizer, std::function<double(int64_t)> factor)
    : LRScheduler(optimizer), factor_(std::move(factor)) {
  TESSERA_CHECK(static_cast<bool>(factor_), "[LambdaLR] needs a factor function");
  apply();
}

double LambdaLR::lr_at(int64_t epoch, double base_lr) const { return base_lr * factor_(epoch); }

}  // namespace tessera::optim
