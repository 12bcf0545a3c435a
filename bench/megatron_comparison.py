#!/usr/bin/env python3
"""tessera-plan's predicted step times against published Megatron-LM runs.

The published runs are Table 1 of Narayanan et al., "Efficient Large-Scale
Language Model Training on GPU Clusters Using Megatron-LM" (SC '21,
arXiv:2104.04473): GPT models of vocabulary 51,200 and sequence 2,048 on
DGX A100 nodes (80 GB), in mixed precision, with activation recomputation.
The paper gives throughput per GPU, counting a step's FLOPs as
96 B s l h^2 (1 + s / 6h + V / 16 l h) (forward, backward and the
recomputed forward); the published step time is those FLOPs over the
throughput of all GPUs.

Each row is planned by tessera-plan on the declared A100 profile
(profiles/dgx_a100.json) in the paper's configuration: its pipeline stages,
each a mesh of [data, tensor] ranks, with activation recomputation on, as
the paper ran; the micro-batch size and every layout are left to the
planner. The last row is GPT-3 175B on 1,024 GPUs, whose 140 TFLOP/s per
GPU the paper gives for its training-time estimate (section 5.1) without a
configuration; it is planned here as 16 stages of [8, 8].

Megatron-LM runs fused kernels (scale, mask and softmax; bias and GELU), so
the rows are planned with --kernels fused: an elementwise op's result that
only the next elementwise, reduction or normalization op reads stays on
chip. --kernels unfused prices every op through memory instead.

Nothing is fitted to the published runs: the profile's figures are the
datasheet's, and its efficiencies are the assumptions it states.

    python3 bench/megatron_comparison.py [--build-dir build] [--profile FILE] [--rows 1.7,175]
                                         [--kernels fused|unfused]
"""
import argparse
import json
import os
import re
import subprocess
import sys

# (billions of parameters, heads, hidden, layers, tensor-parallel,
#  pipeline-parallel, GPUs, batch, published TFLOP/s per GPU)
PUBLISHED = [
    (1.7, 24, 2304, 24, 1, 1, 32, 512, 137),
    (3.6, 32, 3072, 30, 2, 1, 64, 512, 138),
    (7.5, 32, 4096, 36, 4, 1, 128, 512, 142),
    (18.4, 48, 6144, 40, 8, 1, 256, 1024, 135),
    (39.1, 64, 8192, 48, 8, 2, 512, 1536, 138),
    (76.1, 80, 10240, 60, 8, 4, 1024, 1792, 140),
    (145.6, 96, 12288, 80, 8, 8, 1536, 2304, 148),
    (310.1, 128, 16384, 96, 8, 16, 1920, 2160, 155),
    (529.6, 128, 20480, 105, 8, 35, 2520, 2520, 163),
    (1008.0, 160, 25600, 128, 8, 64, 3072, 3072, 163),
    # GPT-3: the paper's estimate's throughput; the configuration is ours.
    (175, 96, 12288, 96, 8, 16, 1024, 1536, 140),
]
VOCAB = 51200
SEQUENCE = 2048


def published_step(row):
    _, _, h, l, _, _, gpus, b, tflops = row
    s, v = SEQUENCE, VOCAB
    flops = 96 * b * s * l * h * h * (1 + s / (6 * h) + v / (16 * l * h))
    return flops / (tflops * 1e12 * gpus)


def plan(build, profile, kernels, row):
    _, heads, h, l, tp, pp, gpus, b, _ = row
    data = gpus // (tp * pp)
    mesh = str(data) if tp == 1 else f"{data}x{tp}"
    command = [os.path.join(build, "tools", "tessera-plan"), "--profile", profile,
               "--mesh", mesh, "--pipeline", str(pp), "--recompute", "on",
               "--layers", str(l), "--d-model", str(h), "--heads", str(heads),
               "--vocab", str(VOCAB), "--sequence", str(SEQUENCE), "--batch", str(b),
               "--dtype", "bf16", "--optimizer-states", "6", "--kernels", kernels]
    out = subprocess.run(command, check=True, capture_output=True, text=True).stdout
    step = float(re.search(r"predicted step: (\S+) s", out).group(1))
    seconds = float(re.search(r"search: (\S+) s", out).group(1))
    config = re.search(r"micro-batch (\d+) per data rank, (\d+) micro-batches", out)
    memory = re.search(r"predicted memory per rank \(fullest stage\): (\S+) GiB", out)
    fits = "DOES NOT FIT" not in out
    return (f"{pp} x [{mesh}]", step, seconds, int(config.group(1)), int(config.group(2)),
            float(memory.group(1)), fits)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build-dir", default="build")
    parser.add_argument("--profile", default="profiles/dgx_a100.json")
    parser.add_argument("--rows", default="",
                        help="comma-separated parameter counts in billions (default: all)")
    parser.add_argument("--kernels", default="fused", choices=["fused", "unfused"])
    args = parser.parse_args()
    tool = os.path.join(args.build_dir, "tools", "tessera-plan")
    if not os.path.exists(tool):
        sys.exit(f"megatron_comparison: {tool} is missing; build first")
    with open(args.profile) as f:
        profile = json.load(f)
    print(f"profile: {profile['name']}\nkernels: {args.kernels}\n")
    rows = PUBLISHED
    if args.rows:
        wanted = [float(x) for x in args.rows.split(",")]
        rows = [row for row in PUBLISHED if row[0] in wanted]
    print("| parameters | GPUs | stages x [data, tensor] | batch | published step | "
          "predicted step | error | micro-batch (count) | memory per GPU | search |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for row in rows:
        mesh, step, seconds, micro, count, memory, fits = plan(args.build_dir, args.profile,
                                                               args.kernels, row)
        want = published_step(row)
        print(f"| {row[0]}B | {row[6]} | {mesh} | {row[7]} | {want:.2f} s | {step:.2f} s "
              f"| {100 * (step / want - 1):+.0f}% | {micro} ({count}) | {memory:.1f} GiB"
              f"{'' if fits else ' (does not fit)'} | {seconds:.0f} s |", flush=True)


if __name__ == "__main__":
    main()
