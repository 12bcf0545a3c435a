#pragma once

// Pipeline parallelism for a described GPT (DESIGN §8): the model's blocks
// cut into stages that run on successive groups of ranks, each stage laid
// out by plan() on its own mesh ([data] or [data, tensor]), and the
// stages' predicted micro-batch times composed by the schedule Megatron-LM
// runs (one forward, one backward; optionally interleaved), with
// activation recomputation as a choice.
//
//   planner::PipelineOptions options;
//   options.stage_mesh = {8, 8};   // each stage: 8-way data x 8-way tensor
//   options.stages = 16;           // 1,024 ranks
//   options.plan.model = global::CostModel::from_file("profiles/dgx_a100.json");
//   planner::PipelinePlan plan = planner::plan_gpt_pipeline(spec, options);
//   std::cout << plan.explain();
//
// The schedule's time, per Narayanan et al. (SC '21): m micro-batches on p
// stages of v chunks each take (m + (p - 1) / v) slots, a slot being the
// slowest stage's forward and backward of one micro-batch plus the
// activations' transfers to and from its neighbours; the gradients are
// reduced (what the last backward does not hide) and applied once per step.
// The first stage keeps the most micro-batches in flight: p with one chunk,
// 2 (p - 1) + (v - 1) p + 1 chunks with v.

#include <cstdint>
#include <string>
#include <vector>

#include "tessera/planner/described_models.h"
#include "tessera/planner/planner.h"

namespace tessera::planner {

enum class Recompute : uint8_t { off, on, choose };

struct PipelineOptions {
  // One stage's ranks: [data] or [data, tensor]. The job has `stages` of them,
  // stage after stage in rank order.
  std::vector<int64_t> stage_mesh;
  int64_t stages = 1;
  // Sequences per micro-batch on each data-parallel rank; 0: the fastest of
  // 1, 2, 4 and 8 that divides the batch and fits.
  int64_t micro_batch = 0;
  // Model chunks per stage (Megatron-LM's interleaved schedule); 1: plain.
  int64_t interleave = 1;
  // Whether each block's forward runs again in its backward, so a
  // micro-batch in flight keeps only the blocks' inputs.
  Recompute recompute = Recompute::choose;
  // The cost model, the memory budget per rank (0: none), optimizer state
  // and search options; `mesh`, `micro_batches` and `pinned` are set per stage.
  PlanOptions plan;
};

// A stage, or the run of middle stages that plan alike.
struct StagePlan {
  GptStage stage;                  // the first stage it stands for
  int64_t count = 1;               // how many stages plan alike
  Plan plan;                       // one micro-batch on the stage's mesh
  double micro_batch_seconds = 0;  // forward and backward, recomputation included
  double recompute_seconds = 0;    // of that, the blocks' forward again
  double in_flight = 0;            // micro-batches whose activations it keeps at its peak
  double peak_bytes = 0;           // per rank, with those in flight
};

// One configuration the search weighed.
struct PipelineCandidate {
  int64_t micro_batch = 0;
  bool recompute = false;
  double step_seconds = 0;
  double peak_bytes = 0;
};

struct PipelinePlan {
  GptSpec spec;  // the whole model; spec.batch: the global batch
  int64_t stages = 1;
  int64_t interleave = 1;
  int64_t micro_batch = 1;    // sequences per micro-batch per data-parallel rank
  int64_t micro_batches = 1;  // per step
  bool recompute = false;
  Placement stage_mesh;
  std::vector<StagePlan> plans;  // first, middle (if any), last; one when stages == 1
  double slot_seconds = 0;       // the slowest stage's micro-batch plus transfers
  double transfer_seconds = 0;   // activations to and from the neighbours, per slot
  double bubble_seconds = 0;     // slots spent filling and draining the pipeline
  double tail_seconds = 0;       // gradient reduction not hidden, and the update
  double step_seconds = 0;
  double peak_bytes = 0;  // the fullest stage's, per rank
  double memory_budget = 0;
  bool fits = true;  // peak_bytes within the budget
  std::vector<PipelineCandidate> candidates;
  double search_seconds = 0;

  int64_t ranks() const { return stages * stage_mesh.size(); }
  // The configuration, each stage's predicted micro-batch and memory, the
  // schedule's time and the configurations weighed.
  std::string explain() const;
};

// Plans `spec` (spec.batch sequences per step, all stages and data ranks
// together) in `options.stages` stages of options.stage_mesh. Raises naming
// the values when the stages do not divide the layers (or the chunks the
// stages' layers), or no micro-batch size divides the batch.
PipelinePlan plan_gpt_pipeline(const GptSpec& spec, const PipelineOptions& options);

}  // namespace tessera::planner
