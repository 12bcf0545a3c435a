#include "tessera/planner/pipeline.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <optional>

#include "tessera/core/error.h"

namespace tessera::planner {

namespace {

// A block's forward FLOPs per token (the q, k, v, out and MLP matmuls, the
// attention scores and their use) and the head's, to tell how much of a
// stage's forward its blocks are: recomputation reruns the blocks only.
double block_forward_flops(const GptSpec& spec) {
  const auto d = static_cast<double>(spec.d_model);
  const auto t = static_cast<double>(spec.sequence);
  return 24 * d * d + 4 * t * d;
}

double head_forward_flops(const GptSpec& spec) {
  return 2 * static_cast<double>(spec.d_model) * static_cast<double>(spec.vocab);
}

// The micro-batches (in units of a whole stage's activations) the stage at
// `index` keeps in flight at its peak.
double in_flight(int64_t index, int64_t stages, int64_t chunks, int64_t micro_batches) {
  const auto p = static_cast<double>(stages);
  const auto v = static_cast<double>(chunks);
  const auto m = static_cast<double>(micro_batches);
  if (chunks == 1) return std::min(m, p - static_cast<double>(index));
  const double warm_up = 2 * (p - static_cast<double>(index) - 1) + (v - 1) * p + 1;
  return std::min(m * v, warm_up) / v;
}

// A stage's micro-batch time and peak memory per rank under the schedule:
// `activation` is one micro-batch's activation bytes, `index` the stage's
// place (its kind's first), `m` micro-batches of `chunks` chunks on
// `stages` stages.
void price_stage(StagePlan& stage, const GptSpec& spec, bool recompute, double activation,
                 int64_t index, int64_t stages, int64_t chunks, int64_t m) {
  const StepPrediction& prediction = stage.plan.prediction;
  const auto blocks = static_cast<double>(stage.stage.layers);
  const double block_flops = blocks * block_forward_flops(spec);
  const double head_flops = stage.stage.last ? head_forward_flops(spec) : 0;
  const double block_share =
      block_flops + head_flops > 0 ? block_flops / (block_flops + head_flops) : 0;
  stage.recompute_seconds = recompute ? prediction.forward_seconds * block_share : 0;
  stage.micro_batch_seconds = prediction.micro_batch_seconds + stage.recompute_seconds;
  stage.in_flight = in_flight(index, stages, chunks, m);
  // One micro-batch's peak, less what it keeps for its backward pass, plus
  // what the micro-batches in flight keep.
  const double working = prediction.peak_bytes - prediction.saved_bytes;
  if (recompute && blocks > 0) {
    // Each block's input, whole on every tensor rank (as Megatron-LM keeps
    // it), and what is not a block (the head's activations); one block's
    // own activations while it is recomputed.
    const double kept = blocks * activation + prediction.saved_bytes * (1 - block_share);
    stage.peak_bytes =
        working + stage.in_flight * kept + prediction.saved_bytes * block_share / blocks;
  } else {
    stage.peak_bytes = working + stage.in_flight * prediction.saved_bytes;
  }
}

}  // namespace

std::string PipelinePlan::explain() const {
  auto line = [](const char* format, auto... values) {
    char text[512];
    std::snprintf(text, sizeof text, format, values...);
    return std::string(text);
  };
  std::string text;
  text += line("pipeline: %lld stages x %s (%lld ranks), %lld chunk(s) per stage, ",
               static_cast<long long>(stages), placement_str(stage_mesh).c_str(),
               static_cast<long long>(ranks()), static_cast<long long>(interleave));
  text += line("micro-batch %lld per data rank, %lld micro-batches per step, recomputation %s\n",
               static_cast<long long>(micro_batch), static_cast<long long>(micro_batches),
               recompute ? "on" : "off");
  for (const StagePlan& stage : plans) {
    const GptStage& s = stage.stage;
    std::string what = s.first && s.last ? "the whole model"
                       : s.first         ? "embeddings + blocks"
                       : s.last          ? "blocks + head"
                                         : "blocks";
    const int64_t index = s.first_layer / (spec.layers / stages);
    std::string which = std::to_string(index);
    if (stage.count > 1) {
      which += '-';
      which += std::to_string(index + stage.count - 1);
    }
    text += line("  stage%s %s (%s, layers %lld-%lld): micro-batch %s", stage.count > 1 ? "s" : "",
                 which.c_str(), what.c_str(), static_cast<long long>(s.first_layer),
                 static_cast<long long>(s.first_layer + s.layers - 1),
                 seconds_str(stage.micro_batch_seconds).c_str());
    if (recompute) text += " (recomputation " + seconds_str(stage.recompute_seconds) + ")";
    text += line(", %.3g in flight, peak %.4g GiB per rank (state %.4g GiB)\n", stage.in_flight,
                 stage.peak_bytes / (1 << 30), stage.plan.prediction.state_bytes / (1 << 30));
  }
  text += "  step " + seconds_str(step_seconds) + " = " +
          line("%lld", static_cast<long long>(micro_batches)) + " slots of " +
          seconds_str(slot_seconds) + " (transfers " + seconds_str(transfer_seconds) +
          ") + bubble " + seconds_str(bubble_seconds) + " + gradients and update " +
          seconds_str(tail_seconds) + "\n";
  if (candidates.size() > 1) {
    text += "  weighed (micro-batch, recomputation: step, peak per rank):";
    for (const PipelineCandidate& c : candidates) {
      text += line(" %lld %s: %s %.3g GiB%s;", static_cast<long long>(c.micro_batch),
                   c.recompute ? "on" : "off", seconds_str(c.step_seconds).c_str(),
                   c.peak_bytes / (1 << 30),
                   memory_budget > 0 && c.peak_bytes > memory_budget ? " (over budget)" : "");
    }
    text.back() = '\n';
  }
  return text;
}

PipelinePlan plan_gpt_pipeline(const GptSpec& spec, const PipelineOptions& options) {
  const auto started = std::chrono::steady_clock::now();
  const int64_t p = options.stages;
  const int64_t v = options.interleave;
  TESSERA_CHECK(!options.stage_mesh.empty() && options.stage_mesh.size() <= 2,
                "[plan_gpt_pipeline] a stage's mesh is [data] or [data, tensor], got ",
                options.stage_mesh.size(), " axes");
  TESSERA_CHECK(p >= 1 && v >= 1, "[plan_gpt_pipeline] stages (", p, ") and interleave (", v,
                ") must be at least 1");
  TESSERA_CHECK(spec.layers % (p * v) == 0, "[plan_gpt_pipeline] ", p, " stages of ", v,
                " chunk(s) do not divide the model's ", spec.layers,
                " layers; valid stage counts divide ", spec.layers);
  TESSERA_CHECK(v == 1 || p > 1, "[plan_gpt_pipeline] interleaving (", v,
                " chunks) needs more than one stage");
  TESSERA_CHECK(options.micro_batch >= 0, "[plan_gpt_pipeline] micro_batch must be 0 (choose) ",
                "or positive, got ", options.micro_batch);
  const Placement mesh = Placement::cpu_mesh(options.stage_mesh);
  const int64_t data = options.stage_mesh[0];
  const int64_t tensor = options.stage_mesh.size() == 2 ? options.stage_mesh[1] : 1;
  const global::CostModel& model = options.plan.model;
  const double budget = options.plan.memory_budget;

  std::vector<int64_t> sizes;
  if (options.micro_batch > 0) {
    sizes = {options.micro_batch};
  } else {
    sizes = {1, 2, 4, 8};
  }
  std::vector<int64_t> usable;
  for (int64_t b : sizes) {
    if (spec.batch % (b * data) == 0) usable.push_back(b);
  }
  TESSERA_CHECK(
      !usable.empty(), "[plan_gpt_pipeline] the batch of ", spec.batch,
      " sequences is not a whole number of micro-batches of ",
      options.micro_batch > 0 ? std::to_string(options.micro_batch) : std::string("1, 2, 4 or 8"),
      " sequences on each of ", data, " data-parallel ranks");

  // The stages that plan differently: first, middle (one stands for all),
  // last; a single stage is the whole model.
  const int64_t per_stage = spec.layers / p;
  std::vector<std::pair<GptStage, int64_t>> kinds;
  if (p == 1) {
    kinds.push_back({GptStage{0, spec.layers, true, true}, 1});
  } else {
    kinds.push_back({GptStage{0, per_stage, true, false}, 1});
    if (p > 2) kinds.push_back({GptStage{per_stage, per_stage, false, false}, p - 2});
    kinds.push_back({GptStage{spec.layers - per_stage, per_stage, false, true}, 1});
  }
  const double element = static_cast<double>(dtype_size(spec.dtype));
  std::vector<Recompute> recomputes;
  if (options.recompute == Recompute::choose) {
    recomputes = {Recompute::off, Recompute::on};
  } else {
    recomputes = {options.recompute};
  }

  std::optional<PipelinePlan> best;
  std::vector<std::string> unfit;  // micro-batch sizes whose one micro-batch does not fit
  std::vector<PipelineCandidate> candidates;
  for (int64_t b : usable) {
    const int64_t m = spec.batch / (b * data);
    GptSpec micro = spec;
    micro.batch = b * data;
    // One micro-batch's activation (or its gradient), and one hop of it to
    // the next stage: each tensor rank sends its 1/tensor piece over the
    // link between the stages, and the pieces are gathered on the other side.
    const double activation = static_cast<double>(b) * static_cast<double>(spec.sequence) *
                              static_cast<double>(spec.d_model) * element;
    double hop = 0;
    if (p > 1) {
      const global::LinkModel link = model.link(2, mesh.size() + 1);
      hop = link.alpha_seconds + activation / static_cast<double>(tensor) * link.seconds_per_byte;
      if (tensor > 1) {
        hop += model.collective_seconds(global::Collective::all_gather,
                                        activation / static_cast<double>(tensor), tensor);
      }
    }
    std::vector<StagePlan> planned;
    int64_t index = 0;
    for (const auto& [stage, count] : kinds) {
      PlanOptions plan_options = options.plan;
      plan_options.mesh = mesh;
      plan_options.micro_batches = m;
      plan_options.pinned.clear();
      nn::Module::NamedTensors names;
      const graph::Graph graph = trace_gpt_stage(micro, stage, names);
      StagePlan stage_plan;
      stage_plan.stage = stage;
      stage_plan.count = count;
      // One micro-batch must fit the budget. With the micro-batches in
      // flight (at their lightest, recomputed where that is allowed) it may
      // not: then the stage is planned again under a budget smaller by the
      // excess, a few times.
      double stage_budget = budget;
      bool fits = false;
      for (int attempt = 0; attempt < 6 && !fits; ++attempt) {
        plan_options.memory_budget = stage_budget;
        StagePlan trial;
        trial.stage = stage;
        trial.count = count;
        try {
          trial.plan = plan(graph, plan_options, names);
        } catch (const BudgetError& error) {
          if (stage_plan.plan.ops.empty()) {
            unfit.push_back("micro-batch " + std::to_string(b) + ": " + error.what());
          }
          break;  // (a tighter budget than one micro-batch needs)
        }
        price_stage(trial, spec, options.recompute != Recompute::off, activation, index, p, v, m);
        fits = budget <= 0 || trial.peak_bytes <= budget;
        // Below the peak of the plan just found (a budget above it finds
        // the same plan again), by the excess shared over the micro-batches
        // in flight (what one keeps, each keeps).
        stage_budget = std::min(stage_budget, trial.plan.prediction.peak_bytes) -
                       (trial.peak_bytes - budget) * 1.05 / std::max(1.0, trial.in_flight);
        // The lightest plan found stays.
        if (stage_plan.plan.ops.empty() || trial.peak_bytes < stage_plan.peak_bytes) {
          stage_plan = std::move(trial);
        }
        if (stage_budget <= 0) break;
      }
      if (stage_plan.plan.ops.empty()) break;  // not even one micro-batch fits
      planned.push_back(std::move(stage_plan));
      index += count;
    }
    if (planned.size() < kinds.size()) continue;
    for (Recompute recompute : recomputes) {
      PipelinePlan result;
      result.spec = spec;
      result.stages = p;
      result.interleave = v;
      result.micro_batch = b;
      result.micro_batches = m;
      result.recompute = recompute == Recompute::on;
      result.stage_mesh = mesh;
      result.memory_budget = budget;
      result.plans = planned;
      double slowest = 0;
      double tail = 0;
      int64_t at = 0;
      for (StagePlan& stage : result.plans) {
        price_stage(stage, spec, result.recompute, activation, at, p, v, m);
        slowest = std::max(slowest, stage.micro_batch_seconds);
        tail = std::max(tail, stage.plan.prediction.gradient_tail_seconds +
                                  stage.plan.prediction.update_seconds);
        result.peak_bytes = std::max(result.peak_bytes, stage.peak_bytes);
        at += stage.count;
      }
      result.transfer_seconds = p > 1 ? 2 * static_cast<double>(v) * hop : 0;
      result.slot_seconds = slowest + result.transfer_seconds;
      result.bubble_seconds =
          static_cast<double>(p - 1) / static_cast<double>(v) * result.slot_seconds;
      result.tail_seconds = tail;
      result.step_seconds =
          static_cast<double>(m) * result.slot_seconds + result.bubble_seconds + tail;
      result.fits = budget <= 0 || result.peak_bytes <= budget;
      candidates.push_back({b, result.recompute, result.step_seconds, result.peak_bytes});
      // The fastest that fits; while none fits, the smallest.
      const bool better =
          !best || (result.fits && !best->fits) ||
          (result.fits == best->fits && (result.fits ? result.step_seconds < best->step_seconds
                                                     : result.peak_bytes < best->peak_bytes));
      if (better) best = std::move(result);
    }
  }
  if (!best) {
    std::string why;
    for (const std::string& line : unfit) why += "\n  " + line;
    TESSERA_CHECK(false, "[plan_gpt_pipeline] no micro-batch size fits ", budget / (1 << 30),
                  " GiB per rank in ", p, " stages of ", placement_str(mesh), ":", why);
  }
  best->candidates = std::move(candidates);
  best->search_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  return std::move(*best);
}

}  // namespace tessera::planner
