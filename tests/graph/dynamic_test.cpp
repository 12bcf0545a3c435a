// Dynamic dims (graph::dynamic): a new size of a marked dim re-plans the
// traced graph without tracing again, and the runs equal eager's.

#include <limits>

#include "examples/models/gpt.h"
#include "tessera/graph/compile.h"
#include "testing.h"
#include "training_run.h"

namespace tessera::testing {
namespace {

using Batch = std::pair<Tensor, Tensor>;

struct Trained : TrainingRun {
  int calls = 0;  // how often the step function itself ran (eagerly or traced)
  int compiles = 0, replans = 0;
};

// Trains on `batches` in order, eagerly or compiled with the dims `marked`
// (per input) dynamic.
template <typename Model, typename MakeOptimizer, typename LossFn>
Trained train(std::shared_ptr<Model> model, MakeOptimizer make_optimizer, LossFn loss_fn,
              const std::vector<Batch>& batches, bool compiled,
              const std::vector<std::vector<int64_t>>& marked) {
  auto optimizer = make_optimizer(model->parameters());
  Trained out;
  auto step = [&](const TensorVector& in) -> TensorVector {
    ++out.calls;
    optimizer->zero_grad();
    Tensor loss = loss_fn(model->forward(in[0]), in[1]);
    loss.backward();
    optimizer->step();
    return {loss};
  };
  auto compiled_step = graph::compile(step);
  for (const auto& [x, y] : batches) {
    TensorVector in{x, y};
    for (size_t i = 0; i < marked.size(); ++i) {
      for (int64_t dim : marked[i]) graph::dynamic(in[i], dim);
    }
    const Tensor loss = compiled ? compiled_step(in)[0] : step(in)[0];
    out.losses.push_back(loss.item<double>());
  }
  out.compiles = compiled_step.compiles();
  out.replans = compiled_step.replans();
  for (const Tensor& p : model->parameters()) out.params.push_back(p.clone());
  return out;
}

std::vector<Batch> class_batches(const std::vector<int64_t>& rows) {
  std::vector<Batch> batches;
  for (size_t i = 0; i < rows.size(); ++i) {
    manual_seed(40 + i);
    batches.emplace_back(randn({rows[i], 6}), randint(0, 3, {rows[i]}));
  }
  return batches;
}

std::shared_ptr<nn::Sequential> make_mlp() {
  manual_seed(4);
  return std::make_shared<nn::Sequential>(std::initializer_list<std::shared_ptr<nn::Module>>{
      std::make_shared<nn::Linear>(6, 16), std::make_shared<nn::ReLU>(),
      std::make_shared<nn::Linear>(16, 3)});
}

auto sgd_momentum = [](const std::vector<Tensor>& params) {
  return std::make_unique<optim::SGD>(params, optim::SGDOptions{.lr = 0.1, .momentum = 0.9});
};
auto cross_entropy_of = [](const Tensor& logits, const Tensor& y) {
  return cross_entropy(logits, y);
};

TEST(GraphDynamic, NewBatchSizesReplanWithoutTracingAndMatchEager) {
  // Batches of 8 rows, then 5, 3 and 8 again: the first compile traces at 8
  // (and at two probe sizes); 5 and 3 re-plan; nothing traces again.
  const std::vector<Batch> batches = class_batches({8, 8, 5, 8, 3, 5, 8, 3});
  const Trained eager = train(make_mlp(), sgd_momentum, cross_entropy_of, batches, false, {});
  const Trained compiled =
      train(make_mlp(), sgd_momentum, cross_entropy_of, batches, true, {{0}, {0}});
  expect_same_run(eager, compiled);
  EXPECT_EQ(compiled.compiles, 1);
  EXPECT_EQ(compiled.replans, 2);
  // One eager warm-up call, the trace and its two probes.
  EXPECT_EQ(compiled.calls, 4);
}

// The template is of the optimised graph: a re-plan resizes the compile's
// fused nodes (a step's number that follows the size included) and runs no
// pass, and the values are eager's.
TEST(GraphDynamic, AReplanResizesTheOptimisedGraph) {
  auto fn = [](const TensorVector& in) -> TensorVector {
    const auto rows = static_cast<double>(in[0].size(0));
    return {(exp(in[0] * (0.1 * rows)) - 1.0).sum({1})};
  };
  auto compiled = graph::compile(fn);
  for (int64_t rows : {8, 8, 5, 11}) {
    const Tensor x = graph::dynamic(uniform({rows, 3}, -1, 1, 9).to(DType::f32), 0);
    EXPECT_TRUE(equal(compiled({x})[0], fn({x})[0])) << rows;
  }
  EXPECT_EQ(compiled.compiles(), 1);
  EXPECT_EQ(compiled.replans(), 2);
  const graph::Graph& replanned = compiled.last_graph();
  EXPECT_TRUE(std::any_of(replanned.nodes().begin(), replanned.nodes().end(),
                          [](const graph::Node& node) { return node.fused != nullptr; }))
      << replanned.str();
  EXPECT_EQ(replanned.value(replanned.outputs()[0]).meta.shape, (Shape{11}));
}

// Constant folding rounds `full`'s double (here 0.1 * rows) to an f32
// constant. The constant keeps the double, so the template of the optimised
// graph fits the size exactly: at 11 rows its constant is the f32 of 1.1 a
// trace at 11 rows makes, where the rounded numbers would fit a line an ulp
// off.
TEST(GraphDynamic, AFoldedFractionOfTheSizeIsFittedFromTheHostsDouble) {
  auto fn = [](const TensorVector& in) -> TensorVector {
    return {in[0] * (0.1 * static_cast<double>(in[0].size(0)))};
  };
  auto passes = [](const graph::Graph& graph) { return graph::run_passes(graph, {}, false); };
  auto meta = [](int64_t rows) { return MetaVector{TensorMeta{{rows, 3}, DType::f32, Device{}}}; };
  const graph::Graph optimised = passes(graph::trace(fn, meta(8)));
  ASSERT_EQ(optimised.constants().size(), 1u) << optimised.str();
  EXPECT_EQ(optimised.constants()[0].exact, 0.1 * 8);
  const std::vector<graph::DynamicSize> sizes = graph::group_sizes(meta(8), {{0}});
  const graph::ShapeTemplate shapes(meta(8), optimised, sizes,
                                    graph::trace_probes(fn, meta(8), sizes), passes);
  for (int64_t rows : {5, 11, 1000}) {
    const graph::Graph resized = shapes.instantiate({rows});
    const graph::Graph traced = passes(graph::trace(fn, meta(rows)));
    ASSERT_EQ(resized.constants().size(), 1u) << resized.str();
    const Tensor& got = resized.constants()[0].tensor;
    EXPECT_EQ(got.dtype(), DType::f32);
    EXPECT_EQ(got.item<float>(), traced.constants()[0].tensor.item<float>()) << rows;
    EXPECT_EQ(got.item<float>(), static_cast<float>(0.1 * static_cast<double>(rows))) << rows;
  }
}

TEST(GraphDynamic, WithoutAMarkEverySizeCompiles) {
  const std::vector<Batch> batches = class_batches({8, 8, 5, 3});
  const Trained compiled = train(make_mlp(), sgd_momentum, cross_entropy_of, batches, true, {});
  EXPECT_EQ(compiled.compiles, 3);
  EXPECT_EQ(compiled.replans, 0);
}

models::GPTConfig small_gpt(double dropout) {
  return {
      .vocab_size = 24, .context = 12, .d_model = 16, .heads = 2, .layers = 2, .dropout = dropout};
}

std::vector<Batch> token_batches(const std::vector<std::pair<int64_t, int64_t>>& sizes) {
  std::vector<Batch> batches;
  for (size_t i = 0; i < sizes.size(); ++i) {
    manual_seed(70 + i);
    const auto [rows, length] = sizes[i];
    batches.emplace_back(randint(0, 24, {rows, length}), randint(0, 24, {rows, length}));
  }
  return batches;
}

auto adamw = [](const std::vector<Tensor>& params) {
  return std::make_unique<optim::AdamW>(params, optim::AdamWOptions{.lr = 1e-2});
};
auto token_loss = [](const Tensor& logits, const Tensor& y) {
  return cross_entropy(logits.reshape({-1, logits.size(-1)}), y.reshape({-1}));
};

TEST(GraphDynamic, AGptWithDropoutReplansForNewBatchSizes) {
  // Dropout's masks are drawn afresh at every size, as eager draws them, and
  // AdamW's step count carries across the plans.
  const std::vector<Batch> batches = token_batches({{4, 8}, {4, 8}, {3, 8}, {6, 8}, {4, 8}});
  auto make = [] {
    manual_seed(5);
    return std::make_shared<models::GPT>(small_gpt(0.1));
  };
  manual_seed(9);
  const Trained eager = train(make(), adamw, token_loss, batches, false, {});
  manual_seed(9);
  const Trained compiled = train(make(), adamw, token_loss, batches, true, {{0}, {0}});
  expect_same_run(eager, compiled);
  EXPECT_EQ(compiled.compiles, 1);
  EXPECT_EQ(compiled.replans, 2);
}

TEST(GraphDynamic, BatchAndSequenceLengthCanBothBeDynamic) {
  // Two sizes: the batch (4) and the sequence length (8, up to the model's
  // context of 12). The attention's [T, T] mask and its position
  // embeddings follow the length, and so does the number of random
  // counters its dropout draws (a quarter of B x H x T x T).
  const std::vector<Batch> batches =
      token_batches({{4, 8}, {4, 8}, {3, 8}, {4, 5}, {2, 11}, {4, 8}});
  auto make = [] {
    manual_seed(6);
    return std::make_shared<models::GPT>(small_gpt(0.1));
  };
  manual_seed(10);
  const Trained eager = train(make(), adamw, token_loss, batches, false, {});
  manual_seed(10);
  const Trained compiled = train(make(), adamw, token_loss, batches, true, {{0, 1}, {0, 1}});
  expect_same_run(eager, compiled);
  EXPECT_EQ(compiled.compiles, 1);
  EXPECT_EQ(compiled.replans, 3);
}

TEST(GraphDynamic, ANumberThatIsNotAffineInTheSizeRefusesAndCompilesEachSize) {
  // The function scales by 1 / rows computed on the host: not affine in the
  // size, so the dim cannot be dynamic. It says so and stays correct.
  auto fn = [](const TensorVector& in) -> TensorVector {
    const double rows = static_cast<double>(in[0].size(0));
    return {in[0].sum() * (1.0 / rows)};
  };
  auto compiled = graph::compile(fn);
  for (int64_t rows : {4, 4, 6, 9}) {
    const Tensor x = graph::dynamic(uniform({rows, 3}), 0);
    EXPECT_TRUE(all_close(compiled({x})[0], fn({x})[0])) << rows;
  }
  EXPECT_EQ(compiled.compiles(), 3);
  EXPECT_EQ(compiled.replans(), 0);
}

TEST(GraphDynamic, AHostNumberAffineInTheSizeFollowsIt) {
  // A number computed on the host from the size (rows * 2 + 1) is a
  // constant of the graph that the re-plan evaluates at the new size.
  auto fn = [](const TensorVector& in) -> TensorVector {
    const double rows = static_cast<double>(in[0].size(0));
    return {in[0].sum({0}) * (rows * 2 + 1), in[0].reshape({in[0].size(0) * 3})};
  };
  auto compiled = graph::compile(fn);
  for (int64_t rows : {4, 4, 6, 9, 1}) {
    const Tensor x = graph::dynamic(uniform({rows, 3}), 0);
    const TensorVector got = compiled({x});
    const TensorVector want = fn({x});
    EXPECT_TRUE(all_close(got[0], want[0])) << rows;
    EXPECT_TRUE(equal(got[1], want[1])) << rows;
  }
  EXPECT_EQ(compiled.compiles(), 1);
  EXPECT_EQ(compiled.replans(), 3);
}

TEST(GraphDynamic, NumbersThatDoNotFollowTheSizeKeepTheirExactValues) {
  // A clamp of int64 values against a tensor bound of INT64_MAX: the bound
  // does not vary with the size and must come back exactly (a double would
  // not hold it).
  auto fn = [](const TensorVector& in) -> TensorVector {
    const Tensor high = full({}, std::numeric_limits<int64_t>::max(), DType::i64);
    return {
        clamp(in[0], std::optional<Tensor>(zeros({}, DType::i64)), std::optional<Tensor>(high))};
  };
  auto compiled = graph::compile(fn);
  for (int64_t rows : {4, 4, 6, 3}) {
    const Tensor x = graph::dynamic(randint(-5, 5, {rows, 2}), 0);
    EXPECT_TRUE(equal(compiled({x})[0], fn({x})[0])) << rows;
  }
  EXPECT_EQ(compiled.compiles(), 1);
  EXPECT_EQ(compiled.replans(), 2);
}

// A re-plan whose inferred shapes fail (here a zeros() of negative size:
// 30 - n fitted at 8, 9 and 19 but clamped at 0 by the host) traces again,
// and the new trace gives the right values; a size the function itself
// rejects raises its error and keeps the template for the next size.
TEST(GraphDynamic, AReplanThatCannotInferTracesAgain) {
  auto padded = [](const TensorVector& in) -> TensorVector {
    const int64_t n = in[0].size(0);
    Tensor head = in[0].narrow(0, 0, std::min<int64_t>(n, 30));
    Tensor pad = zeros({std::max<int64_t>(30 - n, 0), 2});
    return {cat({head, pad}, 0) * 2.0};
  };
  auto compiled = graph::compile(padded);
  for (int64_t rows : {8, 8, 12, 35}) {
    const Tensor x = graph::dynamic(randn({rows, 2}), 0);
    EXPECT_TRUE(equal(compiled({x})[0], padded({x})[0])) << rows;
  }
  EXPECT_EQ(compiled.compiles(), 2);  // 8, then 35
  EXPECT_EQ(compiled.replans(), 1);   // 12

  // 2n - 8 rows: the up probe (n = 9 wants 10) fails, the down one fits.
  auto doubled = [](const TensorVector& in) -> TensorVector {
    return {in[0].narrow(0, 0, 2 * in[0].size(0) - 8) + 1.0};
  };
  auto compiled2 = graph::compile(doubled);
  for (int64_t rows : {8, 8, 5}) {
    const Tensor x = graph::dynamic(randn({rows, 2}), 0);
    EXPECT_TRUE(equal(compiled2({x})[0], doubled({x})[0])) << rows;
  }
  EXPECT_EQ(compiled2.replans(), 1);
  EXPECT_HAS(error_of([&] { compiled2({graph::dynamic(randn({12, 2}), 0)}); }), "narrow");
  const Tensor x6 = graph::dynamic(randn({6, 2}), 0);
  EXPECT_TRUE(equal(compiled2({x6})[0], doubled({x6})[0]));
  EXPECT_EQ(compiled2.compiles(), 1);
  EXPECT_EQ(compiled2.replans(), 2);  // the template outlived the bad size
}

// Two marked dims of equal size at the trace (a batch of 6 sequences of 6)
// are one size to the first fit, which a reshape to B * T rows breaks; the
// dims then get a size each, and a later (4, 6) re-plans.
TEST(GraphDynamic, EqualMarkedSizesSplitByDimWhenOneSizeDoesNotFit) {
  auto flat = [](const TensorVector& in) -> TensorVector {
    return {in[0].reshape({in[0].size(0) * in[0].size(1), 1}) * 3.0};
  };
  auto compiled = graph::compile(flat);
  for (const auto& [b, t] :
       std::vector<std::pair<int64_t, int64_t>>{{6, 6}, {6, 6}, {4, 6}, {5, 3}}) {
    const Tensor x = graph::dynamic(graph::dynamic(randn({b, t}), 0), 1);
    EXPECT_TRUE(equal(compiled({x})[0], flat({x})[0])) << b << " x " << t;
  }
  EXPECT_EQ(compiled.compiles(), 1);
  EXPECT_EQ(compiled.replans(), 2);
}

// Beyond kMaxPlans, the plan used least recently is dropped; its size plans
// again when it comes back, and values stay right throughout.
TEST(GraphDynamic, OnlySoManyPlansAreKept) {
  auto fn = [](const TensorVector& in) -> TensorVector { return {in[0] * 2.0 + 1.0}; };
  auto compiled = graph::compile(fn);
  const auto kept = static_cast<int64_t>(graph::CompiledFunction::kMaxPlans);
  for (int64_t rows = 1; rows <= kept + 3; ++rows) {
    const Tensor x = graph::dynamic(randn({rows + 3, 2}), 0);
    EXPECT_TRUE(equal(compiled({x})[0], fn({x})[0])) << rows;
    if (rows == 1) {
      EXPECT_TRUE(equal(compiled({x})[0], fn({x})[0]));  // the compile
    }
  }
  const int planned = compiled.compiles() + compiled.replans();
  EXPECT_EQ(planned, kept + 3);
  const Tensor first = graph::dynamic(randn({4, 2}), 0);  // dropped: planned again
  EXPECT_TRUE(equal(compiled({first})[0], fn({first})[0]));
  EXPECT_EQ(compiled.compiles() + compiled.replans(), planned + 1);
}

TEST(GraphDynamic, BadMarksAreClearErrors) {
  EXPECT_HAS(
      error_of([] {
        graph::dynamic(ones({2, 3}), 2);
      }),
      "[graph::dynamic] dim 2 is out of range for a tensor of shape [2, 3] (valid: -2 to 1)");
  EXPECT_HAS(error_of([] { graph::dynamic(Tensor::scalar(1.0), 0); }), "it is 0-d");
  EXPECT_HAS(error_of([] { graph::dynamic(Tensor(), 0); }), "undefined");
  const Tensor x = ones({2, 3});
  graph::dynamic(x, -1);
  EXPECT_EQ(graph::dynamic_dims(x), (std::vector<int64_t>{1}));
  EXPECT_TRUE(graph::dynamic_dims(ones({2, 3})).empty());
}

}  // namespace
}  // namespace tessera::testing
