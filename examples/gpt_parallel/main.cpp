// Trains the character GPT of examples/char_gpt on several processes, with
// data parallelism, tensor parallelism or both, chosen only by layouts: the
// model code is the one-process model. Start it with the launcher:
//
//   ./build/tools/tessera-run -n 4 ./build/examples/gpt_parallel --dp 2 --tp 2
//       [--steps 200] [--batch-size 16] [--context 64] [--d-model 128] [--heads 4]
//       [--layers 2] [--lr 0.001] [--save DIR] [--seed 0]   (--help lists all)
//
// --dp x --tp must equal the number of processes. The mesh is [dp, tp]: the
// batch is split along dim 0 on the dp axis; on the tp axis the attention
// output projection stays whole while the feed-forward pair, the token
// embedding and the head are split Megatron-style. Rank 0 prints the layout
// of every parameter, then the loss as it trains.
//
// With --auto the planner chooses every layout instead (planner/
// auto_parallel.h): it traces one step, plans it for the [dp, tp] mesh
// (under --memory-budget-mib per rank, if given; a --profile from
// tessera-calibrate prices it for this machine), prints its explanation
// and trains on its layouts:
//
//   ./build/tools/tessera-run -n 4 ./build/examples/gpt_parallel --dp 2 --tp 2 --auto
//
// With --auto --graph the whole training step, written for one device, is
// compiled with graph::compile's auto_parallel: its first call plans it,
// lays the model out and runs it; later calls run the compiled graph.
#include <cstdio>
#include <map>
#include <optional>
#include <string>

#include "examples/models/gpt.h"
#include "tessera/planner/auto_parallel.h"
#include "tessera/tessera.h"
#include "tessera/utils/flags.h"
#include "tessera/utils/progress.h"

using namespace tessera;

namespace {

struct Options {
  int64_t dp = 0;  // 0: all processes
  int64_t tp = 1;
  int64_t steps = 200;
  int64_t batch_size = 16;
  int64_t context = 64;
  int64_t d_model = 128;
  int64_t heads = 4;
  int64_t layers = 2;
  double lr = 1e-3;
  std::string save;
  uint64_t seed = 0;
  bool auto_parallel = false;
  bool graph = false;
  double memory_budget_mib = 0;
  std::string profile;
};

Options parse(int argc, char** argv) {
  Options options;
  utils::Flags flags(
      "Trains a small GPT on the fortunes over several processes (start with tessera-run).");
  flags.add("--dp", options.dp, "data-parallel degree (default: processes / tp)");
  flags.add("--tp", options.tp, "tensor-parallel degree");
  flags.add("--steps", options.steps, "training steps");
  flags.add("--batch-size", options.batch_size, "windows per step, over all data-parallel ranks");
  flags.add("--context", options.context, "bytes per window");
  flags.add("--d-model", options.d_model, "model width");
  flags.add("--heads", options.heads, "attention heads");
  flags.add("--layers", options.layers, "transformer blocks");
  flags.add("--lr", options.lr, "peak AdamW learning rate");
  flags.add("--save", options.save, "save a sharded checkpoint into this folder at the end");
  flags.add("--seed", options.seed, "seed for initialisation and shuffling");
  flags.add_switch("--auto", options.auto_parallel,
                   "let the planner choose every layout (and print why)");
  flags.add_switch("--graph", options.graph,
                   "with --auto: compile each step as a graph (graph::compile's auto_parallel)");
  flags.add("--memory-budget-mib", options.memory_budget_mib,
            "with --auto: memory per rank the plan may use (0: no limit)");
  flags.add("--profile", options.profile,
            "with --auto: a cost profile (tessera-calibrate's) to plan with");
  flags.parse(argc, argv);
  if (options.steps < 1 || options.batch_size < 1 || options.context < 2 || options.tp < 1 ||
      options.dp < 0)
    flags.fail("--steps, --batch-size and --tp must be at least 1, --context 2");
  if (options.graph && !options.auto_parallel) flags.fail("--graph needs --auto");
  return options;
}

// Megatron-style splits for models::GPT on the tensor-parallel mesh axis.
std::map<std::string, global::TpStyle> tensor_parallel_plan(int64_t layers) {
  std::map<std::string, global::TpStyle> plan{{"token", global::TpStyle::vocab},
                                              {"head", global::TpStyle::column}};
  for (int64_t i = 0; i < layers; ++i) {
    const std::string block = "blocks." + std::to_string(i) + ".";
    plan[block + "linear1"] = global::TpStyle::column;
    plan[block + "linear2"] = global::TpStyle::row;
  }
  return plan;
}

int train(const Options& options) {
  auto world = distributed::init_process_group();
  const int64_t processes = world->size();
  const int64_t dp = options.dp == 0 ? processes / options.tp : options.dp;
  TESSERA_CHECK(dp * options.tp == processes, "[gpt_parallel] --dp ", dp, " x --tp ", options.tp,
                " must equal the ", processes, " processes (start with tessera-run -n N)");
  const bool leader = world->rank() == 0;
  manual_seed(options.seed);

  auto dataset = std::make_shared<data::CharDataset>(
      data::CharDataset::from_fortunes(options.context));
  // Every rank reads the same batches; the layout then keeps its part.
  data::DataLoader loader(dataset, {.batch_size = options.batch_size,
                                    .shuffle = true,
                                    .drop_last = true,
                                    .seed = options.seed});
  models::GPTConfig config{.vocab_size = 256,
                           .context = options.context,
                           .d_model = options.d_model,
                           .heads = options.heads,
                           .layers = options.layers};
  auto model = std::make_shared<models::GPT>(config);
  const Placement mesh = Placement::cpu_mesh({dp, options.tp});
  nn::CrossEntropyLoss loss_fn;
  NdSbp batch_layout = global::batch_sbp(2, /*dp_axis=*/0);
  NdSbp target_layout = batch_layout;
  planner::Plan plan;
  if (options.auto_parallel && !options.graph) {
    planner::PlanOptions plan_options;
    plan_options.memory_budget = options.memory_budget_mib * 1024 * 1024;
    if (!options.profile.empty()) {
      plan_options.model = global::CostModel::from_file(options.profile);
    }
    const data::Example sample = *loader.begin();
    auto loss_of = [&](const TensorVector& batch) {
      return loss_fn(model->forward(batch[0]).flatten(0, 1), batch[1].flatten());
    };
    plan = planner::auto_parallelize(*model, mesh, loss_of, {sample.data, sample.target},
                                     plan_options);
    batch_layout = plan.sbp_of("input 0");
    target_layout = plan.sbp_of("input 1");
    if (leader) std::printf("%s", plan.explain().c_str());
  } else if (!options.auto_parallel) {
    global::parallelize(*model, mesh,
                        options.tp > 1 ? tensor_parallel_plan(options.layers)
                                       : std::map<std::string, global::TpStyle>{},
                        /*tp_axis=*/1);
  }
  auto describe = [&] {
    if (!leader) return;
    std::printf("mesh [dp=%lld, tp=%lld] over %lld processes; batch %s\n",
                static_cast<long long>(dp), static_cast<long long>(options.tp),
                static_cast<long long>(processes), nd_sbp_str(batch_layout).c_str());
    std::printf("%s", global::describe_layout(*model).c_str());
  };
  if (!options.graph) describe();

  optim::AdamW optimizer(model->parameters(), {.lr = options.lr, .weight_decay = 0.1});
  optim::LinearWarmupCosine schedule(optimizer, std::min<int64_t>(100, options.steps / 10),
                                     options.steps, options.lr / 10);
  // With --graph: the whole step, written for one device, compiled with
  // auto_parallel; its first call plans it and lays the model out.
  std::optional<graph::CompiledFunction> compiled;
  if (options.graph) {
    graph::CompileOptions compile_options{.mesh = mesh,
                                          .auto_parallel = true,
                                          .memory_budget = options.memory_budget_mib * 1024 * 1024,
                                          .names = model->named_parameters()};
    if (!options.profile.empty()) {
      compile_options.cost_model = global::CostModel::from_file(options.profile);
    }
    compiled.emplace(graph::compile(
        [&](const TensorVector& batch) -> TensorVector {
          optimizer.zero_grad();
          Tensor loss = loss_fn(model->forward(batch[0]).flatten(0, 1), batch[1].flatten());
          loss.backward();
          optim::clip_grad_norm_(model->parameters(), 1.0);
          optimizer.step();
          return {loss};
        },
        compile_options));
  }
  const NdSbp broadcast = NdSbp::broadcast(2);
  utils::ProgressBar progress("training", options.steps, leader);
  int64_t step = 0;
  float last = 0;
  for (int64_t epoch = 0; step < options.steps; ++epoch) {
    loader.set_epoch(epoch);
    for (const data::Example& batch : loader) {
      Tensor loss;
      if (compiled) {
        // The whole batch on every rank: the step lays it out as planned.
        loss = (*compiled)({batch.data, batch.target})[0];
        if (step == 0) {
          const planner::Plan& planned = planner::plan_of(*compiled);
          batch_layout = planned.sbp_of("input 0");
          if (leader) std::printf("%s", planned.explain().c_str());
          describe();
        }
      } else {
        Tensor inputs = batch.data.to_global(mesh, broadcast).to_global(mesh, batch_layout);
        Tensor targets = batch.target.to_global(mesh, broadcast).to_global(mesh, target_layout);
        optimizer.zero_grad();
        {
          // With --auto, each op call takes the plan's signature.
          std::optional<global::LayoutScript> follow;
          if (options.auto_parallel) follow.emplace(plan.signatures());
          Tensor logits = model->forward(inputs);
          loss = loss_fn(logits.flatten(0, 1), targets.flatten());
          loss.backward();
        }
        optim::clip_grad_norm_(model->parameters(), 1.0);
        optimizer.step();
      }
      schedule.step();
      last = loss.item<float>();  // gathers the global loss on every rank
      progress.update(batch.data.size(0), last);
      if (++step == options.steps) break;
    }
  }
  if (leader) std::printf("\nfinal loss %.4f\n", static_cast<double>(last));
  if (!options.save.empty()) {
    global::save_sharded(options.save, model->state_dict());
    if (leader) std::printf("saved a sharded checkpoint in %s\n", options.save.c_str());
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const Options options = parse(argc, argv);
  try {
    return train(options);
  } catch (const std::exception& error) {
    std::fprintf(stderr, "gpt_parallel: %s\n", error.what());
    return 1;
  }
}
