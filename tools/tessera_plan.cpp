// tessera-plan: plans a model described by a few numbers for a device
// profile and a mesh, without running anything (DESIGN §8): the layout of
// every tensor, and the predicted step time, MFU and memory per rank.
//
//   tessera-plan --profile profiles/dgx_h100.json --mesh 128x8
//                --layers 32 --d-model 4096 --heads 32 --vocab 50257
//                --sequence 2048 --batch 1024 --dtype bf16 --optimizer-states 6
//   (one command line)
//
// The step is traced on meta tensors (planner/described_models.h), so no
// parameter is allocated. With --pipeline P the model runs in P stages of
// the --mesh each (P x the mesh's ranks in all), its batch in micro-batches
// (--micro-batch per data rank, chosen when not given), with activation
// recomputation as --recompute says (chosen when not given). With --kernels
// fused, an elementwise op's result that only the next elementwise,
// reduction or normalization op reads stays on chip (PlanOptions::
// fuse_elementwise), as fused kernels keep it:
//
//   tessera-plan --profile profiles/dgx_a100.json --mesh 8x8 --pipeline 16
//                --layers 96 --d-model 12288 --heads 96 --vocab 51200
//                --sequence 2048 --batch 1536 --dtype bf16 --optimizer-states 6

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "tessera/planner/described_models.h"
#include "tessera/planner/pipeline.h"
#include "tessera/planner/planner.h"
#include "tessera/tessera.h"

using namespace tessera;

namespace {

[[noreturn]] void usage(const std::string& problem) {
  std::fprintf(stderr,
               "tessera-plan: %s\n"
               "usage: tessera-plan [--profile FILE] --mesh N|AxB [--layers L] [--d-model D]\n"
               "         [--heads H] [--vocab V] [--sequence T] [--batch B] [--dtype f32|bf16]\n"
               "         [--optimizer-states S] [--memory-budget-gib G] [--pin NAME=SBP[,SBP]]\n"
               "         [--ilp-seconds S] [--kernels unfused|fused] [--explain] [--dot FILE]\n"
               "         [--save FILE]\n"
               "         [--pipeline P [--micro-batch B] [--interleave V] [--recompute on|off]]\n",
               problem.c_str());
  std::exit(2);
}

int64_t integer(const std::string& flag, const std::string& text) {
  char* end = nullptr;
  const long long value = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || value < 1 || value > (int64_t{1} << 40)) {
    usage(flag + " needs a positive integer, got '" + text + "'");
  }
  return value;
}

double number(const std::string& flag, const std::string& text) {
  char* end = nullptr;
  const double value = std::strtod(text.c_str(), &end);
  if (text.empty() || *end != '\0' || !std::isfinite(value) || value < 0) {
    usage(flag + " needs a number >= 0, got '" + text + "'");
  }
  return value;
}

void write_file(const std::string& path, const std::string& text) {
  std::ofstream file(path);
  file << text;
  if (!file.good()) throw std::runtime_error("cannot write '" + path + "'");
}

// Model FLOPs of one step (Megatron-LM's count, without recomputation):
// 72 B T L d^2 (1 + T / 6d + V / 12 L d).
double model_flops_of(const planner::GptSpec& spec) {
  const double b = static_cast<double>(spec.batch), t = static_cast<double>(spec.sequence);
  const double l = static_cast<double>(spec.layers), d = static_cast<double>(spec.d_model);
  const double v = static_cast<double>(spec.vocab);
  return 72 * b * t * l * d * d * (1 + t / (6 * d) + v / (12 * l * d));
}

void print_model(const planner::GptSpec& spec, const planner::PlanOptions& options) {
  std::printf(
      "model: GPT of %.3g parameters (%lld layers, d_model %lld, %lld heads, vocab %lld), "
      "batch %lld x %lld tokens, %s\n",
      static_cast<double>(planner::gpt_parameters(spec)), static_cast<long long>(spec.layers),
      static_cast<long long>(spec.d_model), static_cast<long long>(spec.heads),
      static_cast<long long>(spec.vocab), static_cast<long long>(spec.batch),
      static_cast<long long>(spec.sequence), dtype_name(spec.dtype));
  std::printf("profile: %s\n",
              options.model.name.empty() ? "defaults (no --profile)" : options.model.name.c_str());
  std::printf("kernels: %s\n", options.fuse_elementwise
                                   ? "fused (elementwise results stay on chip, --kernels fused)"
                                   : "unfused (each op through memory)");
}

void print_throughput(const planner::GptSpec& spec, const global::CostModel& model,
                      double step_seconds, double ranks) {
  const double tokens = static_cast<double>(spec.batch) * static_cast<double>(spec.sequence);
  const double per_rank = model_flops_of(spec) / step_seconds / ranks;
  std::printf("throughput: %.4g tokens/s, %.4g model TFLOP/s per rank", tokens / step_seconds,
              per_rank / 1e12);
  if (model.peak_flops_per_second > 0) {
    std::printf(", MFU %.1f%%", 100 * per_rank / model.peak_flops_per_second);
  }
  std::printf("\n");
}

void print_memory(const char* what, double peak, double state, const global::CostModel& model) {
  std::printf("predicted memory per rank%s: %.4g GiB = state %.4g GiB + activations %.4g GiB", what,
              peak / (1 << 30), state / (1 << 30), (peak - state) / (1 << 30));
  if (model.memory_bytes > 0) {
    std::printf(" (device: %.4g GiB%s)", model.memory_bytes / (1 << 30),
                peak > model.memory_bytes ? ", DOES NOT FIT" : "");
  }
  std::printf("\n");
}

// --pipeline: the stages planned and composed (planner/pipeline.h).
int plan_pipeline(const planner::GptSpec& spec, const std::vector<int64_t>& mesh,
                  const planner::PlanOptions& options, planner::PipelineOptions pipeline,
                  bool explain) {
  pipeline.stage_mesh = mesh;
  pipeline.plan = options;
  const planner::PipelinePlan plan = planner::plan_gpt_pipeline(spec, pipeline);
  print_model(spec, options);
  std::printf("mesh: %lld stages x %s, %lld ranks\n", static_cast<long long>(plan.stages),
              placement_str(plan.stage_mesh).c_str(), static_cast<long long>(plan.ranks()));
  std::string search = "";
  for (const planner::StagePlan& stage : plan.plans) {
    search += (search.empty() ? "" : "; ") + stage.plan.search_result();
  }
  std::printf("search: %.2f s, %zu configurations weighed, stages: %s\n", plan.search_seconds,
              plan.candidates.size(), search.c_str());
  std::printf("%s", plan.explain().c_str());
  if (explain) {
    for (const planner::StagePlan& stage : plan.plans) {
      std::printf("\nstage from layer %lld:\n%s\n", static_cast<long long>(stage.stage.first_layer),
                  stage.plan.explain().c_str());
    }
  }
  std::printf(
      "predicted step: %.4g s = %lld micro-batches x %.4g s + bubble %.4g s + "
      "gradients and update %.4g s\n",
      plan.step_seconds, static_cast<long long>(plan.micro_batches), plan.slot_seconds,
      plan.bubble_seconds, plan.tail_seconds);
  print_throughput(spec, options.model, plan.step_seconds, static_cast<double>(plan.ranks()));
  double state = 0;
  for (const planner::StagePlan& stage : plan.plans) {
    if (stage.peak_bytes == plan.peak_bytes) state = stage.plan.prediction.state_bytes;
  }
  print_memory(" (fullest stage)", plan.peak_bytes, state, options.model);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  planner::GptSpec spec;
  planner::PlanOptions options;
  // The declared machines' published runs used PyTorch, whose autograd
  // keeps only what the gradients read.
  options.tape_keeps_inputs = false;
  std::vector<int64_t> mesh;
  bool explain = false;
  std::string dot_path, save_path;
  planner::PipelineOptions pipeline;
  bool pipelined = false;
  try {
    for (int i = 1; i < argc; ++i) {
      const std::string flag = argv[i];
      if (flag == "--explain") {
        explain = true;
        continue;
      }
      if (flag == "--help" || flag == "-h") usage("plans a described model without running it");
      if (i + 1 >= argc) usage("unknown argument or missing value: '" + flag + "'");
      const std::string value = argv[++i];
      if (flag == "--profile") {
        options.model = global::CostModel::from_file(value);
      } else if (flag == "--mesh") {
        mesh.clear();
        size_t start = 0;
        while (true) {
          const size_t x = value.find('x', start);
          mesh.push_back(integer(flag, value.substr(start, x - start)));
          if (x == std::string::npos) break;
          start = x + 1;
        }
        if (mesh.size() > 2) usage("--mesh is N or AxB (1-D or 2-D), got '" + value + "'");
      } else if (flag == "--layers") {
        spec.layers = integer(flag, value);
      } else if (flag == "--d-model") {
        spec.d_model = integer(flag, value);
      } else if (flag == "--heads") {
        spec.heads = integer(flag, value);
      } else if (flag == "--vocab") {
        spec.vocab = integer(flag, value);
      } else if (flag == "--sequence") {
        spec.sequence = integer(flag, value);
      } else if (flag == "--batch") {
        spec.batch = integer(flag, value);
      } else if (flag == "--dtype") {
        if (value != "f32" && value != "bf16") usage("--dtype is f32 or bf16, got '" + value + "'");
        spec.dtype = value == "f32" ? DType::f32 : DType::bf16;
      } else if (flag == "--optimizer-states") {
        options.optimizer_states = number(flag, value);
      } else if (flag == "--kernels") {
        if (value != "unfused" && value != "fused") {
          usage("--kernels is unfused or fused, got '" + value + "'");
        }
        options.fuse_elementwise = value == "fused";
      } else if (flag == "--ilp-seconds") {
        options.search.ilp_seconds = number(flag, value);
      } else if (flag == "--memory-budget-gib") {
        options.memory_budget = number(flag, value) * 1024 * 1024 * 1024;
      } else if (flag == "--pin") {
        const size_t equals = value.find('=');
        if (equals == std::string::npos) usage("--pin is NAME=SBP[,SBP], got '" + value + "'");
        std::vector<Sbp> sbps;
        size_t start = equals + 1;
        while (true) {
          const size_t comma = value.find(',', start);
          sbps.push_back(planner::parse_sbp(value.substr(start, comma - start)));
          if (comma == std::string::npos) break;
          start = comma + 1;
        }
        options.pinned[value.substr(0, equals)] = NdSbp(sbps);
      } else if (flag == "--pipeline") {
        pipeline.stages = integer(flag, value);
        pipelined = true;
      } else if (flag == "--micro-batch") {
        pipeline.micro_batch = integer(flag, value);
      } else if (flag == "--interleave") {
        pipeline.interleave = integer(flag, value);
      } else if (flag == "--recompute") {
        if (value != "on" && value != "off") usage("--recompute is on or off, got '" + value + "'");
        pipeline.recompute = value == "on" ? planner::Recompute::on : planner::Recompute::off;
      } else if (flag == "--dot") {
        dot_path = value;
      } else if (flag == "--save") {
        save_path = value;
      } else {
        usage("unknown argument '" + flag + "'");
      }
    }
    if (mesh.empty()) usage("--mesh is required");
    // A plan must fit the device the profile describes, unless told otherwise.
    if (options.memory_budget == 0) options.memory_budget = options.model.memory_bytes;
    options.mesh = Placement::cpu_mesh(mesh);
    if (!pipelined && (pipeline.micro_batch > 0 || pipeline.interleave > 1 ||
                       pipeline.recompute != planner::Recompute::choose)) {
      usage("--micro-batch, --interleave and --recompute go with --pipeline (1: no stages)");
    }
    if (pipelined && (!options.pinned.empty() || !dot_path.empty() || !save_path.empty())) {
      usage(
          "--pin, --dot and --save plan or write one step's layouts; with --pipeline each "
          "stage has its own, so they are not taken (--explain prints every stage's plan)");
    }
    if (pipelined) return plan_pipeline(spec, mesh, options, pipeline, explain);
    nn::Module::NamedTensors names;
    const graph::Graph step = planner::trace_gpt_step(spec, names);
    const planner::Plan plan = planner::plan(step, options, names);
    const planner::StepPrediction& p = plan.prediction;
    const double ranks = static_cast<double>(options.mesh.size());
    if (explain) std::printf("%s\n", plan.explain().c_str());
    print_model(spec, options);
    std::printf("mesh: %s, %.0f ranks\n", placement_str(options.mesh).c_str(), ranks);
    std::printf("search: %.2f s, %d choices, %d left after elimination, %s\n", plan.search_seconds,
                plan.choice_nodes, plan.remaining, plan.search_result().c_str());
    std::printf(
        "predicted step: %.4g s = compute %.4g s + exposed communication %.4g s "
        "(of %.4g s)\n",
        p.step_seconds, p.compute_seconds, p.exposed_seconds, p.communication_seconds);
    print_throughput(spec, options.model, p.step_seconds, ranks);
    print_memory("", p.peak_bytes, p.state_bytes, options.model);
    if (!dot_path.empty()) write_file(dot_path, plan.dot());
    if (!save_path.empty()) write_file(save_path, plan.to_json());
  } catch (const std::exception& error) {
    std::fprintf(stderr, "tessera-plan: %s\n", error.what());
    return 1;
  }
  return 0;
}
