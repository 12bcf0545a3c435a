// The activation and loss modules that wrap ops/activation.h and
// ops/elementwise_loss.h: each compared with the torch.nn module of the same
// name (values and gradients), their reprs, and their argument checks.

#include "testing.h"
#include "torch_check.h"

namespace tessera::testing {
namespace {

using V = std::vector<Tensor>;

// Runs `module` on x and compares with `torch_module`(a).
::testing::AssertionResult same_as_torch(const std::string& torch_module, nn::Module& module,
                                         const Tensor& x) {
  return matches_torch("torch.nn." + torch_module + "(a)", {x},
                       [&module](const V& in) { return module.forward(in[0]); });
}

TEST(ActivationModulesTorch, MatchTorchNn) {
  Tensor x = uniform({3, 4}, -4, 4);
  nn::LeakyReLU leaky(0.2);
  EXPECT_TRUE(same_as_torch("LeakyReLU(0.2)", leaky, x));
  nn::ELU elu(0.5);
  EXPECT_TRUE(same_as_torch("ELU(0.5)", elu, x));
  nn::CELU celu(2.0);
  EXPECT_TRUE(same_as_torch("CELU(2.0)", celu, x));
  nn::SELU selu;
  EXPECT_TRUE(same_as_torch("SELU()", selu, x));
  nn::Hardtanh hardtanh(-2.0, 1.5);
  EXPECT_TRUE(same_as_torch("Hardtanh(-2.0, 1.5)", hardtanh, x));
  nn::ReLU6 relu6;
  EXPECT_TRUE(same_as_torch("ReLU6()", relu6, x));
  nn::Hardswish hardswish;
  EXPECT_TRUE(same_as_torch("Hardswish()", hardswish, x));
  nn::Hardsigmoid hardsigmoid;
  EXPECT_TRUE(same_as_torch("Hardsigmoid()", hardsigmoid, x));
  nn::Mish mish;
  EXPECT_TRUE(same_as_torch("Mish()", mish, x));
  nn::LogSigmoid logsigmoid;
  EXPECT_TRUE(same_as_torch("LogSigmoid()", logsigmoid, x));
  nn::Softsign softsign;
  EXPECT_TRUE(same_as_torch("Softsign()", softsign, x));
  nn::Softplus softplus(2.0, 3.0);
  EXPECT_TRUE(same_as_torch("Softplus(2.0, 3.0)", softplus, x));
  nn::GLU glu(0);
  EXPECT_TRUE(same_as_torch("GLU(0)", glu, uniform({4, 3})));
  nn::Threshold threshold(0.1, 20);
  EXPECT_TRUE(same_as_torch("Threshold(0.1, 20.0)", threshold, x));
}

TEST(ActivationModulesTorch, PReLUHasALearntSlope) {
  nn::PReLU prelu(3, 0.1);
  ASSERT_EQ(prelu.parameters().size(), 1u);
  EXPECT_EQ(prelu.weight.shape(), (Shape{3}));
  Tensor x = uniform({2, 3, 4}, -2, 2).to(DType::f32).set_requires_grad(true);
  sum(prelu(x)).backward();
  // d/dw sum(prelu(x)) = sum of the negative entries of each channel.
  Tensor expected = sum(where(lt(x.detach(), 0.0), x.detach(), 0.0), {0, 2});
  EXPECT_TRUE(all_close(prelu.weight.grad(), expected, 1e-5, 1e-6));
  EXPECT_TRUE(matches_torch("torch.nn.functional.prelu(a, torch.full((3,), 0.1))",
                            {x.detach()}, [&](const V& in) { return prelu.forward(in[0]); },
                            {.grad = false}));
  EXPECT_HAS(error_of([] { nn::PReLU(0); }), "[PReLU] num_parameters must be at least 1");
}

TEST(ActivationModules, ReprsAsPyTorchPrintsThem) {
  EXPECT_EQ(nn::LeakyReLU().repr(), "LeakyReLU(negative_slope=0.01)");
  EXPECT_EQ(nn::ELU().repr(), "ELU(alpha=1.0)");
  EXPECT_EQ(nn::CELU().repr(), "CELU(alpha=1.0)");
  EXPECT_EQ(nn::SELU().repr(), "SELU()");
  EXPECT_EQ(nn::Hardtanh().repr(), "Hardtanh(min_val=-1.0, max_val=1.0)");
  EXPECT_EQ(nn::ReLU6().repr(), "ReLU6()");
  EXPECT_EQ(nn::Softplus().repr(), "Softplus(beta=1, threshold=20)");
  EXPECT_EQ(nn::GLU().repr(), "GLU(dim=-1)");
  EXPECT_EQ(nn::Threshold(0.1, 20).repr(), "Threshold(threshold=0.1, value=20)");
  EXPECT_EQ(nn::PReLU(3).repr(), "PReLU(num_parameters=3)");
  EXPECT_HAS(error_of([] { nn::Hardtanh(1.0, -1.0); }), "[Hardtanh] max_val (-1)");
}

TEST(LossModulesTorch, MatchTorchNn) {
  Tensor input = uniform({4, 3}), target = uniform({4, 3}, -1, 1, 2);
  auto same = [&](const std::string& torch_module, nn::Loss& loss, const Tensor& a,
                  const Tensor& b) {
    return matches_torch("torch.nn." + torch_module + "(a, b)", {a, b},
                         [&loss](const V& in) { return loss(in[0], in[1]); });
  };
  nn::L1Loss l1;
  EXPECT_TRUE(same("L1Loss()", l1, input, target));
  nn::L1Loss l1_sum("sum");
  EXPECT_TRUE(same("L1Loss(reduction='sum')", l1_sum, input, target));
  nn::SmoothL1Loss smooth("mean", 0.5);
  EXPECT_TRUE(same("SmoothL1Loss(beta=0.5)", smooth, input, target));
  nn::HuberLoss huber("none", 0.3);
  EXPECT_TRUE(same("HuberLoss(reduction='none', delta=0.3)", huber, input, target));
  Tensor log_probs = log_softmax(input, 1), probs = softmax(target, 1);
  nn::KLDivLoss kl("batchmean");
  EXPECT_TRUE(same("KLDivLoss(reduction='batchmean')", kl, log_probs, probs));
  nn::KLDivLoss kl_log("sum", true);
  EXPECT_TRUE(same("KLDivLoss(reduction='sum', log_target=True)", kl_log, log_probs,
                   log_softmax(target, 1)));
  Tensor p = sigmoid(input), labels = gt(target, 0.0).to(DType::f64);
  nn::BCELoss bce;
  EXPECT_TRUE(same("BCELoss()", bce, p, labels));
  Tensor weight = uniform({3}, 0.5, 2, 3);
  nn::BCELoss weighted(weight, "sum");
  EXPECT_TRUE(matches_torch("torch.nn.BCELoss(weight=c, reduction='sum')(a, b)",
                            {p, labels, weight},
                            [&weighted](const V& in) { return weighted(in[0], in[1]); },
                            {.grad = false}));
  EXPECT_HAS(error_of([] { nn::KLDivLoss("max"); }),
             "[KLDivLoss] reduction must be \"mean\", \"sum\", \"batchmean\" or \"none\"");
  EXPECT_HAS(error_of([] { nn::L1Loss("batchmean"); }),
             "[L1Loss] reduction must be \"mean\", \"sum\" or \"none\"");
  EXPECT_HAS(error_of([] { nn::HuberLoss("mean", 0.0); }), "[HuberLoss] delta must be > 0");
}

TEST(UpsampleTorch, MatchesTorchNnUpsample) {
  Tensor x = uniform({2, 3, 4, 5});
  nn::Upsample nearest({.scale_factor = {2.0}});
  EXPECT_TRUE(matches_torch("torch.nn.Upsample(scale_factor=2)(a)", {x},
                            [&](const V& in) { return nearest(in[0]); }));
  nn::Upsample bilinear({.size = {6, 7}, .mode = "bilinear", .align_corners = true});
  EXPECT_TRUE(matches_torch("torch.nn.Upsample(size=(6, 7), mode='bilinear', align_corners=True)(a)",
                            {x}, [&](const V& in) { return bilinear(in[0]); }));
  nn::Upsample linear({.scale_factor = {1.5}, .mode = "linear"});
  EXPECT_TRUE(matches_torch("torch.nn.Upsample(scale_factor=1.5, mode='linear')(a)",
                            {uniform({2, 3, 4})}, [&](const V& in) { return linear(in[0]); }));
  EXPECT_EQ(nearest.repr(), "Upsample(scale_factor=2.0, mode=nearest)");
  EXPECT_EQ(bilinear.repr(), "Upsample(size=(6, 7), mode=bilinear)");
  EXPECT_EQ(nn::Upsample({.scale_factor = {2.0, 1.5}}).repr(),
            "Upsample(scale_factor=(2.0, 1.5), mode=nearest)");
  EXPECT_HAS(error_of([] { nn::Upsample({}); }),
             "[Upsample] give exactly one of size and scale_factor, got neither");
}

}  // namespace
}  // namespace tessera::testing
