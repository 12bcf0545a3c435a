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
// parameter is allocated.

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "tessera/planner/described_models.h"
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
               "         [--ilp-seconds S] [--explain] [--dot FILE] [--save FILE]\n",
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

}  // namespace

int main(int argc, char** argv) {
  planner::GptSpec spec;
  planner::PlanOptions options;
  std::vector<int64_t> mesh;
  bool explain = false;
  std::string dot_path, save_path;
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
    nn::Module::NamedTensors names;
    const graph::Graph step = planner::trace_gpt_step(spec, names);
    const planner::Plan plan = planner::plan(step, options, names);
    const planner::StepPrediction& p = plan.prediction;
    const double ranks = static_cast<double>(options.mesh.size());
    const double params = static_cast<double>(planner::gpt_parameters(spec));
    // Model FLOPs of one step (Megatron-LM's count, without recomputation):
    // 72 B T L d^2 (1 + T / 6d + V / 12 L d).
    const double b = static_cast<double>(spec.batch), t = static_cast<double>(spec.sequence);
    const double l = static_cast<double>(spec.layers), d = static_cast<double>(spec.d_model);
    const double v = static_cast<double>(spec.vocab);
    const double model_flops = 72 * b * t * l * d * d * (1 + t / (6 * d) + v / (12 * l * d));
    if (explain) std::printf("%s\n", plan.explain().c_str());
    std::printf(
        "model: GPT of %.3g parameters (%lld layers, d_model %lld, %lld heads, vocab %lld), "
        "batch %lld x %lld tokens, %s\n",
        params, static_cast<long long>(spec.layers), static_cast<long long>(spec.d_model),
        static_cast<long long>(spec.heads), static_cast<long long>(spec.vocab),
        static_cast<long long>(spec.batch), static_cast<long long>(spec.sequence),
        dtype_name(spec.dtype));
    std::printf("profile: %s\n", options.model.name.empty() ? "defaults (no --profile)"
                                                            : options.model.name.c_str());
    std::printf("mesh: %s, %.0f ranks\n", placement_str(options.mesh).c_str(), ranks);
    std::printf("search: %.2f s, %d choices, %d left after elimination, %s\n", plan.search_seconds,
                plan.choice_nodes, plan.remaining, plan.search_result().c_str());
    std::printf(
        "predicted step: %.4g s = compute %.4g s + exposed communication %.4g s "
        "(of %.4g s)\n",
        p.step_seconds, p.compute_seconds, p.exposed_seconds, p.communication_seconds);
    std::printf("throughput: %.4g tokens/s, %.4g model TFLOP/s per rank", b * t / p.step_seconds,
                model_flops / p.step_seconds / ranks / 1e12);
    if (options.model.peak_flops_per_second > 0) {
      std::printf(", MFU %.1f%%",
                  100 * model_flops / p.step_seconds / ranks / options.model.peak_flops_per_second);
    }
    std::printf("\npredicted memory per rank: %.4g GiB = state %.4g GiB + activations %.4g GiB",
                p.peak_bytes / (1 << 30), p.state_bytes / (1 << 30),
                p.activation_bytes / (1 << 30));
    if (options.model.memory_bytes > 0) {
      std::printf(" (device: %.4g GiB%s)", options.model.memory_bytes / (1 << 30),
                  p.peak_bytes > options.model.memory_bytes ? ", DOES NOT FIT" : "");
    }
    std::printf("\n");
    if (!dot_path.empty()) write_file(dot_path, plan.dot());
    if (!save_path.empty()) write_file(save_path, plan.to_json());
  } catch (const std::exception& error) {
    std::fprintf(stderr, "tessera-plan: %s\n", error.what());
    return 1;
  }
  return 0;
}
