// The planner's predictions against measured training steps (bench/
// planner_validation.py runs it on 2 and 4 ranks and writes the table in
// docs/auto_parallel.md). For the MLP and the GPT of the training
// benchmark, under data, tensor and (on 4 ranks) 2-D parallelism laid out
// by hand, and under the planner's own plan: the step time and peak memory
// the planner predicts for exactly those parameter and batch layouts, and
// the median eager global training step measured (AdamW), with its spread;
// and the planner's plan once more as graph mode runs it (graph::compile's
// auto_parallel, the whole step compiled; its memory predicted from the
// compiled graph's memory plan, planner::compiled_prediction).
// Rank 0 prints one JSON line per case.
//
//   tessera-run -n 2 ./build/bench/planner_bench --profile profile.json [--steps 8]
//       [--model mlp|gpt]   (default: both)

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "examples/models/gpt.h"
#include "tessera/planner/auto_parallel.h"
#include "tessera/tessera.h"

using namespace tessera;

namespace {

struct Case {
  std::string layout;  // data, tensor, 2-D, planner
  Placement mesh;
  std::map<std::string, global::TpStyle> plan;
  int tp_axis = -1;
  NdSbp batch;  // the hand layouts' batch
};

struct Workload {
  std::string name;
  std::function<std::shared_ptr<nn::Module>()> make;
  std::function<Tensor(nn::Module&, const TensorVector&)> loss;
  TensorVector batch;
  std::map<std::string, global::TpStyle> tp_plan;
};

double quantile(std::vector<double> values, double q) {
  std::sort(values.begin(), values.end());
  return values[static_cast<size_t>(q * static_cast<double>(values.size() - 1) + 0.5)];
}

// Each of `steps` runs of `step`, timed between barriers (every rank
// starts together; the slowest ends it). The allocator's peak counts from
// the first.
std::vector<double> time_steps(int steps, distributed::Group& world,
                               const std::function<void()>& step) {
  CpuAllocator::instance().reset_peak();
  std::vector<double> times;
  for (int i = 0; i < steps; ++i) {
    world.barrier();
    const auto start = std::chrono::steady_clock::now();
    step();
    world.barrier();
    times.push_back(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  return times;
}

// Rank 0 prints the case's JSON line: the plan's prediction, the median
// step measured and its spread, and the peak memory over the ranks: the
// allocator's peak over the steps less what it held before the case made
// its model (the benchmark's own unsplit batches).
void report(const Workload& workload, const Case& c, const planner::Plan& plan,
            const std::vector<double>& times, int followed, int missed, double held_before,
            distributed::Group& world) {
  Tensor peak = Tensor::from_vector(
      std::vector<double>{static_cast<double>(CpuAllocator::instance().stats().peak_bytes) -
                          held_before},
      {1});
  world.all_reduce(peak, distributed::ReduceOp::max);
  const double median = quantile(times, 0.5);
  if (world.rank() == 0) {
    std::printf(
        "{\"model\": \"%s\", \"ranks\": %d, \"mesh\": \"%s\", \"layout\": \"%s\", "
        "\"predicted_seconds\": %.6g, \"measured_seconds\": %.6g, \"spread\": %.4g, "
        "\"predicted_peak_bytes\": %.6g, \"measured_peak_bytes\": %.6g, \"exact\": %s, "
        "\"followed\": %d, \"missed\": %d}\n",
        workload.name.c_str(), world.size(), placement_str(c.mesh).c_str(), c.layout.c_str(),
        plan.prediction.step_seconds, median,
        (quantile(times, 0.75) - quantile(times, 0.25)) / median, plan.prediction.peak_bytes,
        peak.item<double>(), plan.exact ? "true" : "false", followed, missed);
    std::fflush(stdout);
  }
}

double held_bytes() {
  return static_cast<double>(CpuAllocator::instance().stats().current_bytes);
}

void run_case(const Workload& workload, const Case& c, const global::CostModel& model, int steps,
              distributed::Group& world) {
  const double held_before = held_bytes();
  manual_seed(7);
  std::shared_ptr<nn::Module> module = workload.make();
  auto loss_of = [&](const TensorVector& batch) { return workload.loss(*module, batch); };
  planner::PlanOptions options;
  options.model = model;
  options.mesh = c.mesh;
  std::vector<NdSbp> batch_layouts;
  planner::Plan plan;
  if (c.layout.rfind("planner", 0) == 0) {
    plan = planner::auto_parallelize(*module, c.mesh, loss_of, workload.batch, options);
    for (size_t i = 0; i < workload.batch.size(); ++i) {
      batch_layouts.push_back(plan.sbp_of("input " + std::to_string(i)));
    }
  } else {
    // The planner's prediction for exactly the layouts set by hand.
    const graph::Graph step = planner::trace_step(*module, loss_of, workload.batch);
    global::parallelize(*module, c.mesh, c.plan, c.tp_axis);
    for (size_t i = 0; i < workload.batch.size(); ++i) {
      batch_layouts.push_back(c.batch);
      options.pinned["input " + std::to_string(i)] = c.batch;
    }
    for (const auto& [name, param] : module->named_parameters()) {
      options.pinned[name] = param.nd_sbp();
    }
    // The traced step's variables are the parameters before to_global,
    // which keeps the same tensors (in place).
    plan = planner::plan(step, options, module->named_parameters());
  }
  optim::AdamW optimizer(module->parameters(), {.lr = 1e-3});
  TensorVector laid_out;
  for (size_t i = 0; i < workload.batch.size(); ++i) {
    laid_out.push_back(workload.batch[i]
                           .to_global(c.mesh, NdSbp::broadcast(c.mesh.ndim()))
                           .to_global(c.mesh, batch_layouts[i]));
  }
  // Each op call takes the plan's signature (hand layouts too: the
  // prediction is for the plan the planner completed around them).
  int followed = 0;
  int missed = 0;
  auto step = [&] {
    optimizer.zero_grad();
    {
      global::LayoutScript follow = plan.script();
      Tensor loss = loss_of(laid_out);
      loss.backward();
      followed = follow.followed();
      missed = follow.missed();
    }
    optimizer.step();
  };
  for (int i = 0; i < 2; ++i) step();  // warm-up: optimizer state, caches
  report(workload, c, plan, time_steps(steps, world, step), followed, missed, held_before, world);
}

// The planner's plan as graph mode runs it: the step, written for one
// device with its optimizer, compiled with auto_parallel (its first call
// plans it on `c.mesh` and lays the model out); the prediction is that
// plan's. Every op runs the plan's signature, so "followed" is -1 (all).
void run_compiled_case(const Workload& workload, const Case& c, const global::CostModel& model,
                       int steps, distributed::Group& world) {
  const double held_before = held_bytes();
  manual_seed(7);
  std::shared_ptr<nn::Module> module = workload.make();
  optim::AdamW optimizer(module->parameters(), {.lr = 1e-3});
  graph::CompiledFunction compiled = graph::compile(
      [&](const TensorVector& batch) -> TensorVector {
        optimizer.zero_grad();
        Tensor loss = workload.loss(*module, batch);
        loss.backward();
        optimizer.step();
        return {loss};
      },
      {.mesh = c.mesh,
       .auto_parallel = true,
       .names = module->named_parameters(),
       .cost_model = model});
  for (int i = 0; i < 3; ++i) (void)compiled(workload.batch);  // plan, eager, compile
  // The plan's time, and its memory as the compiled graph's memory plan
  // holds it.
  planner::Plan plan = planner::plan_of(compiled);
  plan.prediction = planner::compiled_prediction(compiled);
  const std::vector<double> times =
      time_steps(steps, world, [&] { (void)compiled(workload.batch); });
  report(workload, c, plan, times, -1, 0, held_before, world);
}

}  // namespace

int main(int argc, char** argv) {
  std::string profile;
  int steps = 8;
  std::string only;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--model") == 0) only = argv[i + 1];
    if (std::strcmp(argv[i], "--profile") == 0) profile = argv[i + 1];
    if (std::strcmp(argv[i], "--steps") == 0) steps = std::max(3, std::atoi(argv[i + 1]));
  }
  try {
    std::shared_ptr<distributed::Group> world = distributed::init_process_group();
    const int n = world->size();
    const global::CostModel model =
        profile.empty() ? global::CostModel() : global::CostModel::from_file(profile);

    Generator gen(3);
    Workload mlp{"MLP 784-1024-1024-10, batch 256",
                 [] {
                   return std::static_pointer_cast<nn::Module>(std::make_shared<nn::Sequential>(
                       std::initializer_list<std::shared_ptr<nn::Module>>{
                           std::make_shared<nn::Linear>(784, 1024), std::make_shared<nn::ReLU>(),
                           std::make_shared<nn::Linear>(1024, 1024), std::make_shared<nn::ReLU>(),
                           std::make_shared<nn::Linear>(1024, 10)}));
                 },
                 [](nn::Module& m, const TensorVector& b) {
                   return cross_entropy(static_cast<nn::Sequential&>(m).forward(b[0]), b[1]);
                 },
                 {randn({256, 784}, DType::f32, &gen), randint(0, 10, {256}, DType::i64, &gen)},
                 {{"0", global::TpStyle::column}, {"2", global::TpStyle::row}}};
    models::GPTConfig config;  // bench/train_compare.py's GPT: d 256, 4 layers, 4 heads
    config.context = 64;
    Tensor tokens = randint(0, 256, {16, 65}, DType::i64, &gen);
    Workload gpt{
        "GPT d256 L4 H4, batch 16 x 64",
        [config] {
          return std::static_pointer_cast<nn::Module>(std::make_shared<models::GPT>(config));
        },
        [](nn::Module& m, const TensorVector& b) {
          Tensor logits = static_cast<models::GPT&>(m).forward(b[0]);
          return cross_entropy(logits.flatten(0, 1), b[1].flatten());
        },
        {tokens.narrow(1, 0, 64).contiguous(), tokens.narrow(1, 1, 64).contiguous()},
        {}};
    gpt.tp_plan = {{"token", global::TpStyle::vocab}, {"head", global::TpStyle::column}};
    for (int b = 0; b < config.layers; ++b) {
      gpt.tp_plan["blocks." + std::to_string(b) + ".linear1"] = global::TpStyle::column;
      gpt.tp_plan["blocks." + std::to_string(b) + ".linear2"] = global::TpStyle::row;
    }
    for (const Workload* workload : {&mlp, &gpt}) {
      const bool is_mlp = workload == &mlp;
      if ((only == "mlp" && !is_mlp) || (only == "gpt" && is_mlp)) continue;
      std::vector<Case> cases{
          {"data", Placement::cpu(n), {}, -1, NdSbp(Sbp::split(0))},
          {"tensor", Placement::cpu(n), workload->tp_plan, 0, NdSbp(Sbp::broadcast())}};
      if (n == 4) {
        cases.push_back({"2-D", Placement::cpu_mesh({2, 2}), workload->tp_plan, 1,
                         NdSbp({Sbp::split(0), Sbp::broadcast()})});
      }
      // The planner on each mesh the hand layouts use.
      cases.push_back({"planner", Placement::cpu(n), {}, -1, {}});
      if (n == 4) cases.push_back({"planner 2-D", Placement::cpu_mesh({2, 2}), {}, -1, {}});
      for (const Case& c : cases) run_case(*workload, c, model, steps, *world);
      // The planner's plan in graph mode (graph::compile's auto_parallel).
      run_compiled_case(*workload, {"planner, compiled", Placement::cpu(n), {}, -1, {}}, model,
                        steps, *world);
      if (n == 4) {
        run_compiled_case(*workload,
                          {"planner 2-D, compiled", Placement::cpu_mesh({2, 2}), {}, -1, {}}, model,
                          steps, *world);
      }
    }
  } catch (const std::exception& error) {
    std::fprintf(stderr, "planner_bench: %s\n", error.what());
    return 1;
  }
  return 0;
}
