#pragma once

#include <functional>
#include <string>
#include <vector>

#include "tessera/core/state_dict.h"
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
  const std::vector<double>& base_lrs() const { return base_lrs_; }
  // The learning rate of a group whose base rate is base_lr, at `epoch`.
  virtual double lr_at(int64_t epoch, double base_lr) const = 0;

  // What resuming needs, as PyTorch's scheduler state_dict: "last_epoch"
  // (i64) and "base_lrs" (f64, one per group). The schedule's own
  // arguments are the constructor's. Checkpoints keep it under "scheduler.".
  StateDict state_dict() const;
  // Restores a state_dict from a scheduler over an optimizer with as many
  // groups and sets the optimizer's learning rates for that epoch; unknown,
  // missing or malformed keys raise an error naming them.
  void load_state_dict(const StateDict& state);
  const std::string& name() const { return name_; }

 protected:
  explicit LRScheduler(Optimizer& optimizer, std::string name = "LRScheduler");
  // Subclasses call this at the end of their constructor (lr_at is virtual).
  void apply();

 private:
  Optimizer& optimizer_;
  std::string name_;
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

// base_lr * gamma^(number of milestones <= epoch); milestones increase.
class MultiStepLR : public LRScheduler {
 public:
  MultiStepLR(Optimizer& optimizer, std::vector<int64_t> milestones, double gamma = 0.1);
  double lr_at(int64_t epoch, double base_lr) const override;

 private:
  std::vector<int64_t> milestones_;
  double gamma_;
};

// base_lr * gamma^epoch.
class ExponentialLR : public LRScheduler {
 public:
  ExponentialLR(Optimizer& optimizer, double gamma);
  double lr_at(int64_t epoch, double base_lr) const override;

 private:
  double gamma_;
};

// base_lr times a factor that moves linearly from start_factor to
// end_factor over total_iters epochs, then stays at end_factor.
class LinearLR : public LRScheduler {
 public:
  LinearLR(Optimizer& optimizer, double start_factor = 1.0 / 3.0, double end_factor = 1.0,
           int64_t total_iters = 5);
  double lr_at(int64_t epoch, double base_lr) const override;

 private:
  double start_factor_;
  double end_factor_;
  int64_t total_iters_;
};

// base_lr * factor for the first total_iters epochs, base_lr afterwards.
class ConstantLR : public LRScheduler {
 public:
  ConstantLR(Optimizer& optimizer, double factor = 1.0 / 3.0, int64_t total_iters = 5);
  double lr_at(int64_t epoch, double base_lr) const override;

 private:
  double factor_;
  int64_t total_iters_;
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
