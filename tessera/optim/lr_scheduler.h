#pragma once

#include <functional>
#include <vector>

#include "tessera/optim/optimizer.h"

namespace tessera::optim {

// Sets the optimizer's learning rates from a closed-form schedule of the
// epoch (or step) count, as torch.optim.lr_scheduler. Construction applies
// epoch 0; each step() advances one epoch. The base learning rates are the
// groups' rates at construction.
class LRScheduler {
 public:
  virtual ~LRScheduler() = default;
  void step();
  // Jumps to `epoch` (for resuming from a checkpoint).
  void set_epoch(int64_t epoch);
  int64_t last_epoch() const { return last_epoch_; }
  std::vector<double> get_last_lr() const;
  // The learning rate of a group whose base rate is base_lr, at `epoch`.
  virtual double lr_at(int64_t epoch, double base_lr) const = 0;

 protected:
  explicit LRScheduler(Optimizer& optimizer);
  // Subclasses call this at the end of their constructor (lr_at is virtual).
  void apply();

 private:
  Optimizer& optimizer_;
  std::vector<double> base_lrs_;
  int64_t last_epoch_ = 0;
};

// base_lr * gamma^floor(epoch / step_size).
class StepLR : public LRScheduler {
 public:
  StepLR(Optimizer& optimizer, int64_t step_size, double gamma = 0.1);
  double lr_at(int64_t epoch, double base_lr) const override;

 private:
  int64_t step_size_;
  double gamma_;
};

// eta_min + (base_lr - eta_min) * (1 + cos(pi * epoch / t_max)) / 2.
class CosineAnnealingLR : public LRScheduler {
 public:
  CosineAnnealingLR(Optimizer& optimizer, int64_t t_max, double eta_min = 0.0);
  double lr_at(int64_t epoch, double base_lr) const override;

 private:
  int64_t t_max_;
  double eta_min_;
};

// Linear warm-up from base_lr / warmup_steps to base_lr over the first
// warmup_steps steps, then cosine decay to min_lr at total_steps, then
// min_lr: the usual schedule for transformers.
class LinearWarmupCosine : public LRScheduler {
 public:
  LinearWarmupCosine(Optimizer& optimizer, int64_t warmup_steps, int64_t total_steps,
                     double min_lr = 0.0);
  double lr_at(int64_t epoch, double base_lr) const override;

 private:
  int64_t warmup_steps_;
  int64_t total_steps_;
  double min_lr_;
};

// base_lr * factor(epoch).
class LambdaLR : public LRScheduler {
 public:
  LambdaLR(Optimizer& optimizer, std::function<double(int64_t)> factor);
  double lr_at(int64_t epoch, double base_lr) const override;

 private:
  std::function<double(int64_t)> factor_;
};

}  // namespace tessera::optim
