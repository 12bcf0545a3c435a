#pragma once

#include <optional>
#include <string>
#include <vector>

#include "tessera/nn/module.h"

namespace tessera::nn {

// Upsample's arguments by name, as torch.nn.Upsample's keywords:
//   nn::Upsample up({.scale_factor = {2.0}, .mode = "bilinear"});
// Exactly one of size and scale_factor is given (one entry for every
// spatial dim, or one per dim).
struct UpsampleOptions {
  std::vector<int64_t> size = {};
  std::vector<double> scale_factor = {};
  std::string mode = "nearest";
  std::optional<bool> align_corners = std::nullopt;
  std::optional<bool> recompute_scale_factor = std::nullopt;
};

// Resizes the spatial dims of [N, C, ...] inputs with interpolate
// (ops/interpolate.h), as torch.nn.Upsample.
class Upsample : public Module {
 public:
  explicit Upsample(UpsampleOptions options);
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;

 private:
  UpsampleOptions options_;
};

}  // namespace tessera::nn
