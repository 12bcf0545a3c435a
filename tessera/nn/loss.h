#pragma once

// Loss modules (torch.nn.CrossEntropyLoss, NLLLoss, MSELoss, L1Loss,
// SmoothL1Loss, HuberLoss, KLDivLoss, BCELoss, BCEWithLogitsLoss). Call them
// with (input, target). reduction is "mean", "sum" or "none" (KLDivLoss also
// takes "batchmean").

#include <string>

#include "tessera/nn/module.h"

namespace tessera::nn {

// A module whose forward takes (input, target).
class Loss : public Module {
 public:
  // Module's one-input forward stays visible (it says a loss needs a target).
  using Module::forward;
  virtual Tensor forward(const Tensor& input, const Tensor& target) = 0;
  Tensor operator()(const Tensor& input, const Tensor& target) { return forward(input, target); }
  std::string extra_repr() const override { return "reduction='" + reduction_ + "'"; }

 protected:
  Loss(std::string type_name, std::string reduction, bool batchmean_allowed = false);
  std::string reduction_;
};

// CrossEntropyLoss's arguments by name:
//   nn::CrossEntropyLoss loss({.ignore_index = 0, .label_smoothing = 0.1});
struct CrossEntropyLossOptions {
  Tensor weight = Tensor();  // [C] class weights; undefined for none
  int64_t ignore_index = -100;
  std::string reduction = "mean";
  double label_smoothing = 0.0;
};

// Softmax cross entropy of logits [N, C] (or [N, C, d...]) against class
// indices [N] (or [N, d...]) or class probabilities of the logits' shape.
class CrossEntropyLoss : public Loss {
 public:
  explicit CrossEntropyLoss(Tensor weight = {}, int64_t ignore_index = -100,
                            std::string reduction = "mean", double label_smoothing = 0.0);
  explicit CrossEntropyLoss(const CrossEntropyLossOptions& options)
      : CrossEntropyLoss(options.weight, options.ignore_index, options.reduction,
                         options.label_smoothing) {}
  Tensor forward(const Tensor& input, const Tensor& target) override;

 private:
  Tensor weight_;
  int64_t ignore_index_;
  double label_smoothing_;
};

// NLLLoss's arguments by name: nn::NLLLoss loss({.reduction = "sum"}).
struct NLLLossOptions {
  Tensor weight = Tensor();  // [C] class weights; undefined for none
  int64_t ignore_index = -100;
  std::string reduction = "mean";
};

// Negative log likelihood of log-probabilities [N, C] against class indices.
class NLLLoss : public Loss {
 public:
  explicit NLLLoss(Tensor weight = {}, int64_t ignore_index = -100,
                   std::string reduction = "mean");
  explicit NLLLoss(const NLLLossOptions& options)
      : NLLLoss(options.weight, options.ignore_index, options.reduction) {}
  Tensor forward(const Tensor& input, const Tensor& target) override;

 private:
  Tensor weight_;
  int64_t ignore_index_;
};

// Mean squared error.
class MSELoss : public Loss {
 public:
  explicit MSELoss(std::string reduction = "mean") : Loss("MSELoss", std::move(reduction)) {}
  Tensor forward(const Tensor& input, const Tensor& target) override;
};

// Mean absolute error.
class L1Loss : public Loss {
 public:
  explicit L1Loss(std::string reduction = "mean") : Loss("L1Loss", std::move(reduction)) {}
  Tensor forward(const Tensor& input, const Tensor& target) override;
};

// Quadratic below beta, linear above (ops/elementwise_loss.h).
class SmoothL1Loss : public Loss {
 public:
  explicit SmoothL1Loss(std::string reduction = "mean", double beta = 1.0);
  Tensor forward(const Tensor& input, const Tensor& target) override;

 private:
  double beta_;
};

// Quadratic below delta, linear (slope delta) above.
class HuberLoss : public Loss {
 public:
  explicit HuberLoss(std::string reduction = "mean", double delta = 1.0);
  Tensor forward(const Tensor& input, const Tensor& target) override;

 private:
  double delta_;
};

// Kullback-Leibler divergence of log-probabilities from target
// probabilities (log-probabilities with log_target).
class KLDivLoss : public Loss {
 public:
  explicit KLDivLoss(std::string reduction = "mean", bool log_target = false)
      : Loss("KLDivLoss", std::move(reduction), true), log_target_(log_target) {}
  Tensor forward(const Tensor& input, const Tensor& target) override;

 private:
  bool log_target_;
};

// Binary cross entropy of probabilities in [0, 1]; weight broadcasts to the input.
class BCELoss : public Loss {
 public:
  explicit BCELoss(Tensor weight = {}, std::string reduction = "mean");
  Tensor forward(const Tensor& input, const Tensor& target) override;

 private:
  Tensor weight_;
};

// Sigmoid + binary cross entropy in one numerically stable step; pos_weight
// (broadcast over the last dim) scales the positive term.
class BCEWithLogitsLoss : public Loss {
 public:
  explicit BCEWithLogitsLoss(Tensor pos_weight = {}, std::string reduction = "mean");
  Tensor forward(const Tensor& input, const Tensor& target) override;

 private:
  Tensor pos_weight_;
};

// The function form of BCEWithLogitsLoss.
Tensor binary_cross_entropy_with_logits(const Tensor& input, const Tensor& target,
                                        const Tensor& pos_weight = {},
                                        const std::string& reduction = "mean");

}  // namespace tessera::nn
