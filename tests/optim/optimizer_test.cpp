#include <cmath>

#include "tessera/ops/optimizer_steps.h"
#include "testing.h"

namespace tessera::testing {
namespace {

// A fixed sequence of gradients for a parameter of `n` elements.
std::vector<double> gradient_at(int step, size_t n) {
  std::vector<double> g(n);
  for (size_t i = 0; i < n; ++i) g[i] = std::sin(1.0 + step * 0.7 + static_cast<double>(i) * 1.3);
  return g;
}

// Feeds the fixed gradients to `optimizer` for `steps` steps.
void run_steps(optim::Optimizer& optimizer, Tensor& param, int first, int steps) {
  for (int step = first; step < first + steps; ++step) {
    param.set_grad(Tensor::from_vector(gradient_at(step, param.numel()), param.shape()));
    optimizer.step();
  }
}

// PyTorch's documented SGD algorithm, element by element.
std::vector<double> sgd_reference(std::vector<double> p, int steps, const optim::SGDOptions& o) {
  std::vector<double> buffer(p.size());
  for (int step = 0; step < steps; ++step) {
    std::vector<double> g = gradient_at(step, p.size());
    for (size_t i = 0; i < p.size(); ++i) {
      double d = g[i] + o.weight_decay * p[i];
      if (o.momentum != 0) {
        buffer[i] = step == 0 ? d : o.momentum * buffer[i] + (1 - o.dampening) * d;
        d = o.nesterov ? d + o.momentum * buffer[i] : buffer[i];
      }
      p[i] -= o.lr * d;
    }
  }
  return p;
}

// Adam as in Kingma & Ba with PyTorch's epsilon placement; decoupled decay
// for AdamW.
std::vector<double> adam_reference(std::vector<double> p, int steps, double lr, double beta1,
                                   double beta2, double eps, double decay, bool decoupled) {
  std::vector<double> m(p.size()), v(p.size());
  for (int step = 1; step <= steps; ++step) {
    std::vector<double> g = gradient_at(step - 1, p.size());
    for (size_t i = 0; i < p.size(); ++i) {
      if (decoupled) p[i] *= 1 - lr * decay;
      else g[i] += decay * p[i];
      m[i] = beta1 * m[i] + (1 - beta1) * g[i];
      v[i] = beta2 * v[i] + (1 - beta2) * g[i] * g[i];
      const double m_hat = m[i] / (1 - std::pow(beta1, step));
      const double v_hat = v[i] / (1 - std::pow(beta2, step));
      p[i] -= lr * m_hat / (std::sqrt(v_hat) + eps);
    }
  }
  return p;
}

const std::vector<double> kStart = {0.5, -1.0, 2.0, 0.25, -0.75, 1.5};

TEST(SGD, MatchesReferenceInEveryVariant) {
  for (optim::SGDOptions options :
       {optim::SGDOptions{.lr = 0.1},
        optim::SGDOptions{.lr = 0.1, .momentum = 0.9},
        optim::SGDOptions{.lr = 0.05, .momentum = 0.8, .dampening = 0.3, .weight_decay = 0.01},
        optim::SGDOptions{.lr = 0.05, .momentum = 0.9, .weight_decay = 0.1, .nesterov = true}}) {
    for (DType dtype : {DType::f64, DType::f32}) {
      Tensor param = Tensor::from_vector(kStart, {2, 3}).to(dtype).set_requires_grad();
      optim::SGD sgd({param}, options);
      run_steps(sgd, param, 0, 12);
      const double tolerance = dtype == DType::f64 ? 1e-12 : 1e-5;
      EXPECT_TRUE(all_close(param, sgd_reference(kStart, 12, options), tolerance, tolerance))
          << "momentum " << options.momentum << " nesterov " << options.nesterov;
    }
  }
}

TEST(Adam, AdamAndAdamWMatchReference) {
  Tensor param = Tensor::from_vector(kStart, {6}).set_requires_grad();
  optim::Adam adam({param}, {.lr = 0.01, .beta1 = 0.8, .beta2 = 0.99, .weight_decay = 0.1});
  run_steps(adam, param, 0, 20);
  EXPECT_TRUE(
      all_close(param, adam_reference(kStart, 20, 0.01, 0.8, 0.99, 1e-8, 0.1, false), 1e-10, 1e-12));

  Tensor param_w = Tensor::from_vector(kStart, {6}).set_requires_grad();
  optim::AdamW adamw({param_w}, {.lr = 0.01, .weight_decay = 0.05});
  run_steps(adamw, param_w, 0, 20);
  EXPECT_TRUE(all_close(param_w, adam_reference(kStart, 20, 0.01, 0.9, 0.999, 1e-8, 0.05, true),
                        1e-10, 1e-12));
  EXPECT_EQ(adamw.name(), "AdamW");
}

// Long enough for the update to run in several chunks on the pool and in
// vector lanes with a scalar tail, in both dtypes.
TEST(Adam, LongParametersOfEitherDtypeMatchReference) {
  std::vector<double> start(70001);
  for (size_t i = 0; i < start.size(); ++i) start[i] = std::cos(0.3 * static_cast<double>(i));
  for (DType dtype : {DType::f32, DType::f64}) {
    for (bool decoupled : {false, true}) {
      Tensor param = Tensor::from_vector(start, {static_cast<int64_t>(start.size())}).to(dtype);
      param.set_requires_grad();
      std::unique_ptr<optim::Optimizer> adam;
      if (decoupled) {
        adam = std::make_unique<optim::AdamW>(std::vector<Tensor>{param},
                                              optim::AdamWOptions{.lr = 0.01, .weight_decay = 0.2});
      } else {
        adam = std::make_unique<optim::Adam>(std::vector<Tensor>{param},
                                             optim::AdamOptions{.lr = 0.01, .weight_decay = 0.2});
      }
      run_steps(*adam, param, 0, 5);
      const double tolerance = dtype == DType::f64 ? 1e-12 : 1e-5;
      EXPECT_TRUE(all_close(param, adam_reference(start, 5, 0.01, 0.9, 0.999, 1e-8, 0.2, decoupled),
                            tolerance, tolerance))
          << dtype_name(dtype) << " decoupled " << decoupled;
    }
  }
}

// An update may be handed the same tensor twice, but not two that partly
// share memory: the kernel reads and writes them as distinct arrays.
TEST(Adam, StepRefusesAStateThatPartlyOverlapsTheParameter) {
  Tensor memory = zeros({8});
  Tensor param = memory.narrow(0, 0, 4), grad = ones({4});
  NoGradGuard no_grad;
  EXPECT_HAS(error_of([&] {
               adam_step_(param, grad, memory.narrow(0, 2, 4), zeros({4}), {.lr = 0.1, .step = 1});
             }),
             "[adam_step] writes input 0 in place, but input 2 partly overlaps its memory");
  Tensor state = memory.narrow(0, 4, 4);  // disjoint from the parameter
  adam_step_(param, grad, state, zeros({4}), {.lr = 0.1, .step = 1});
  EXPECT_NEAR(param.sum().item<float>(), -0.4f, 1e-5);
}

TEST(Optimizer, StateDictResumesExactly) {
  // 10 steps straight through equal 4 steps, a save, a fresh optimizer that
  // loads the state, and 6 more.
  Tensor straight = Tensor::from_vector(kStart, {6}).set_requires_grad();
  optim::AdamW reference({straight}, {.lr = 0.02});
  run_steps(reference, straight, 0, 10);

  Tensor resumed = Tensor::from_vector(kStart, {6}).set_requires_grad();
  optim::AdamW first({resumed}, {.lr = 0.02});
  run_steps(first, resumed, 0, 4);
  StateDict saved = first.state_dict();
  EXPECT_TRUE(saved.contains("state.0.exp_avg"));
  EXPECT_EQ(saved.at("state.0.step").item<int64_t>(), 4);
  optim::AdamW second({resumed}, {.lr = 0.5});
  second.load_state_dict(saved);
  EXPECT_DOUBLE_EQ(second.lr(), 0.02);
  run_steps(second, resumed, 4, 6);
  EXPECT_TRUE(all_close(resumed, straight, 0, 0));

  Tensor momentum_param = Tensor::from_vector(kStart, {6}).set_requires_grad();
  optim::SGD sgd({momentum_param}, {.lr = 0.1, .momentum = 0.9});
  run_steps(sgd, momentum_param, 0, 2);
  EXPECT_TRUE(sgd.state_dict().contains("state.0.momentum_buffer"));
}

TEST(Optimizer, LoadStateDictNamesBadKeys) {
  Tensor a = zeros({3}).set_requires_grad(), b = zeros({2, 2}).set_requires_grad();
  optim::Adam adam({a, b});
  run_steps(adam, a, 0, 1);
  StateDict good = adam.state_dict();

  StateDict wrong_shape = good;
  wrong_shape.set("state.0.exp_avg", zeros({4}));
  std::string error = error_of([&] { adam.load_state_dict(wrong_shape); });
  EXPECT_HAS(error, "state.0.exp_avg");
  EXPECT_HAS(error, "[4]");

  StateDict out_of_range = good;
  out_of_range.insert("state.7.exp_avg", zeros({3}));
  EXPECT_HAS(error_of([&] { adam.load_state_dict(out_of_range); }), "state.7.exp_avg");

  StateDict unknown = good;
  unknown.insert("momentum", zeros({1}));
  EXPECT_HAS(error_of([&] { adam.load_state_dict(unknown); }), "unexpected key 'momentum'");

  StateDict no_lr;
  EXPECT_HAS(error_of([&] { adam.load_state_dict(no_lr); }), "param_groups.0.lr");
}

TEST(Optimizer, ValidatesParametersAndOptions) {
  Tensor leaf = zeros({2}).set_requires_grad();
  EXPECT_HAS(error_of([&] { optim::SGD({leaf, leaf}); }), "appears more than once");
  EXPECT_HAS(error_of([&] { optim::SGD({zeros({2}, DType::i64)}); }), "floating-point leaf");
  EXPECT_HAS(error_of([&] { optim::SGD({leaf * 2.0}); }), "not a leaf");
  EXPECT_HAS(error_of([&] { optim::SGD({leaf}, {.lr = -1}); }), "[SGD] lr");
  EXPECT_HAS(error_of([&] { optim::SGD({leaf}, {.lr = 0.1, .nesterov = true}); }), "nesterov");
  EXPECT_HAS(error_of([&] { optim::Adam({leaf}, {.beta1 = 1.0}); }), "[Adam] betas");
  EXPECT_HAS(error_of([&] { optim::SGD({}); }), "empty parameter list");
}

TEST(Optimizer, GroupsZeroGradAndParametersWithoutGradients) {
  Tensor a = ones({2}).set_requires_grad(), b = ones({2}).set_requires_grad();
  optim::SGD sgd({a}, {.lr = 0.1});
  sgd.add_param_group({b}, {.lr = 1.0});
  EXPECT_EQ(sgd.num_param_groups(), 2u);
  sum(a * 2.0 + b * 3.0).backward();
  sgd.step();
  EXPECT_TRUE(all_close(a, {0.8, 0.8}));
  EXPECT_TRUE(all_close(b, {-2.0, -2.0}));
  sgd.zero_grad();
  EXPECT_FALSE(a.grad().defined());
  sgd.step();  // no gradients: nothing moves
  EXPECT_TRUE(all_close(a, {0.8, 0.8}));
  sgd.set_lr(0.5);
  EXPECT_DOUBLE_EQ(sgd.lr(1), 0.5);
  EXPECT_HAS(error_of([&] { sgd.lr(2); }), "group 2");
}

TEST(Optimizer, TrainsALinearRegression) {
  manual_seed(0);
  Tensor x = randn({64, 3});
  Tensor y = matmul(x, make({1.0, -2.0, 0.5}, {3, 1}, DType::f32)) + 0.3;
  nn::Linear model(3, 1);
  optim::Adam adam(model.parameters(), {.lr = 0.05});
  for (int step = 0; step < 300; ++step) {
    adam.zero_grad();
    nn::MSELoss()(model(x), y).backward();
    adam.step();
  }
  EXPECT_TRUE(all_close(model.weight, {1.0, -2.0, 0.5}, 1e-3, 1e-3));
  EXPECT_TRUE(all_close(model.bias, {0.3}, 1e-3, 1e-3));
}

TEST(ClipGrad, ScalesToTheGlobalNorm) {
  Tensor a = zeros({2}).set_requires_grad(), b = zeros({1}).set_requires_grad();
  Tensor c = zeros({1}).set_requires_grad();  // no gradient: skipped
  a.set_grad(make({3.0, 0.0}, {2}, DType::f32));
  b.set_grad(make({4.0}, {1}, DType::f32));
  EXPECT_NEAR(optim::clip_grad_norm_({a, b, c}, 1.0), 5.0, 1e-6);
  EXPECT_TRUE(all_close(a.grad(), {0.6, 0.0}, 1e-5, 1e-6));
  EXPECT_TRUE(all_close(b.grad(), {0.8}, 1e-5, 1e-6));
  // Below the limit nothing changes; the infinity norm is the largest entry.
  EXPECT_NEAR(optim::clip_grad_norm_({a, b}, 10.0, INFINITY), 0.8, 1e-6);
  EXPECT_TRUE(all_close(b.grad(), {0.8}, 1e-5, 1e-6));
  EXPECT_NEAR(optim::clip_grad_norm_({a, b}, 10.0, 1.0), 1.4, 1e-6);

  b.set_grad(make({NAN}, {1}, DType::f32));
  EXPECT_HAS(error_of([&] { optim::clip_grad_norm_({a, b}, 1.0, 2.0, true); }), "nan");

  a.set_grad(make({-3.0, 0.5}, {2}, DType::f32));
  optim::clip_grad_value_({a}, 1.0);
  EXPECT_TRUE(all_close(a.grad(), {-1.0, 0.5}));
}

TEST(LRScheduler, ClosedFormsMatchTheirDefinitions) {
  Tensor p = zeros({1}).set_requires_grad();
  auto lrs_over = [&](auto make_scheduler, int epochs) {
    optim::SGD sgd({p}, {.lr = 1.0});
    auto scheduler = make_scheduler(sgd);
    std::vector<double> lrs;
    for (int epoch = 0; epoch < epochs; ++epoch) {
      lrs.push_back(sgd.lr());
      scheduler.step();
    }
    return lrs;
  };
  auto step_lrs = lrs_over([](optim::SGD& o) { return optim::StepLR(o, 2, 0.5); }, 5);
  EXPECT_EQ(step_lrs, (std::vector<double>{1.0, 1.0, 0.5, 0.5, 0.25}));

  auto cosine = lrs_over([](optim::SGD& o) { return optim::CosineAnnealingLR(o, 4, 0.1); }, 5);
  EXPECT_NEAR(cosine[0], 1.0, 1e-12);
  EXPECT_NEAR(cosine[2], 0.55, 1e-12);  // halfway: the mean of 1 and 0.1
  EXPECT_NEAR(cosine[4], 0.1, 1e-12);

  auto warmup =
      lrs_over([](optim::SGD& o) { return optim::LinearWarmupCosine(o, 4, 12, 0.0); }, 14);
  EXPECT_NEAR(warmup[0], 0.25, 1e-12);
  EXPECT_NEAR(warmup[3], 1.0, 1e-12);
  EXPECT_NEAR(warmup[4], 1.0, 1e-12);
  EXPECT_NEAR(warmup[8], 0.5, 1e-12);
  EXPECT_NEAR(warmup[13], 0.0, 1e-12);

  auto lambda = lrs_over(
      [](optim::SGD& o) { return optim::LambdaLR(o, [](int64_t e) { return 1.0 / (e + 1); }); },
      3);
  EXPECT_NEAR(lambda[2], 1.0 / 3.0, 1e-12);

  optim::SGD sgd({p}, {.lr = 1.0});
  EXPECT_HAS(error_of([&] { optim::StepLR(sgd, 0); }), "[StepLR] step_size");
  EXPECT_HAS(error_of([&] { optim::LinearWarmupCosine(sgd, 10, 5); }), "warmup_steps");
}

using V = std::vector<Tensor>;
const Attrs kSgdAttrs{{"lr", 0.1},         {"momentum", 0.9},
                      {"dampening", 0.1},  {"weight_decay", 0.01},
                      {"nesterov", false}, {"first_step", false}};
TESSERA_SBP_CASE(
    "sgd_step",
    [] {
      return V{uniform({6, 4}, -1, 1, 1), uniform({6, 4}, -1, 1, 2)};
    },
    Attrs{{"lr", 0.1},
          {"momentum", 0.0},
          {"dampening", 0.0},
          {"weight_decay", 0.01},
          {"nesterov", false},
          {"first_step", true}});
TESSERA_SBP_CASE(
    "sgd_momentum_step",
    [] {
      return V{uniform({6, 4}, -1, 1, 3), uniform({6, 4}, -1, 1, 4), uniform({6, 4}, -1, 1, 5)};
    },
    kSgdAttrs);
TESSERA_SBP_CASE(
    "adam_step",
    [] {
      return V{uniform({5, 3}, -1, 1, 6), uniform({5, 3}, -1, 1, 7), uniform({5, 3}, -1, 1, 8),
               uniform({5, 3}, 0, 1, 9)};
    },
    Attrs{{"lr", 0.01},
          {"beta1", 0.9},
          {"beta2", 0.99},
          {"eps", 1e-8},
          {"weight_decay", 0.1},
          {"decoupled", true},
          {"step", int64_t{3}}});

// The fused update ops on their own: their dtype and shape checks.
TEST(OptimizerSteps, UpdatesCheckTheirInputs) {
  NoGradGuard no_grad;
  Tensor param = uniform({3});
  EXPECT_HAS(error_of([&] { sgd_step_(param, uniform({4}), Tensor(), {}); }),
             "[sgd_step] input 1 is [4] f64; every input must match the parameter, [3] f64");
  EXPECT_HAS(error_of([&] { sgd_step_(param, uniform({3}), Tensor(), {.momentum = 0.9}); }),
             "needs a momentum buffer");
  EXPECT_HAS(error_of([&] {
               adam_step_(uniform({3}).to(DType::bf16), uniform({3}).to(DType::bf16),
                          uniform({3}).to(DType::bf16), uniform({3}).to(DType::bf16), {});
             }),
             "[adam_step] no cpu kernel for dtype bf16");
  Tensor strided = zeros({3, 2}).t();
  EXPECT_HAS(error_of([&] {
               sgd_step_(strided, ones({2, 3}), Tensor(), {});
             }),
             "[sgd_step] writes input 0 in place and needs it contiguous");
  // A strided gradient is made contiguous by the dispatcher.
  Tensor p = zeros({2, 3});
  sgd_step_(p, ones({3, 2}).t(), Tensor(), {.lr = 0.5});
  EXPECT_TRUE(all_close(p, {-0.5, -0.5, -0.5, -0.5, -0.5, -0.5}));
}

}  // namespace
}  // namespace tessera::testing
