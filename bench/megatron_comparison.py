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

Only the rows without pipeline stages are compared: the planner does not
model pipelines. Each row is planned by tessera-plan on the declared A100
profile (profiles/dgx_a100.json), on a mesh of [data, tensor] ranks as the
paper's run used, with the layouts left to the planner.

Nothing is fitted to the published runs: the profile's figures are the
datasheet's, and its efficiencies are the assumptions it states.

    python3 bench/megatron_comparison.py [--build-dir build] [--profile FILE]
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
]
VOCAB = 51200
SEQUENCE = 2048


def published_step(row):
    _, _, h, l, _, _, gpus, b, tflops = row
    s, v = SEQUENCE, VOCAB
    flops = 96 * b * s * l * h * h * (1 + s / (6 * h) + v / (16 * l * h))
    return flops / (tflops * 1e12 * gpus)


def plan(build, profile, row):
    _, heads, h, l, tp, _, gpus, b, _ = row
    mesh = str(gpus) if tp == 1 else f"{gpus // tp}x{tp}"
    command = [os.path.join(build, "tools", "tessera-plan"), "--profile", profile,
               "--mesh", mesh, "--layers", str(l), "--d-model", str(h), "--heads", str(heads),
               "--vocab", str(VOCAB), "--sequence", str(SEQUENCE), "--batch", str(b),
               "--dtype", "bf16", "--optimizer-states", "6",
               # Megatron fits these runs by recomputing activations, which
               # the planner does not model: plan without a memory limit.
               "--memory-budget-gib", "1e6"]
    out = subprocess.run(command, check=True, capture_output=True, text=True).stdout
    step = float(re.search(r"predicted step: (\S+) s", out).group(1))
    search = re.search(r"search: (\S+) s, .*?, (proven optimal|best found.*)", out)
    return mesh, step, float(search.group(1)), search.group(2)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build-dir", default="build")
    parser.add_argument("--profile", default="profiles/dgx_a100.json")
    args = parser.parse_args()
    tool = os.path.join(args.build_dir, "tools", "tessera-plan")
    if not os.path.exists(tool):
        sys.exit(f"megatron_comparison: {tool} is missing; build first")
    with open(args.profile) as f:
        profile = json.load(f)
    print(f"profile: {profile['name']}\n")
    print("| parameters | GPUs | mesh [data, tensor] | batch | published step | "
          "predicted step | error | search |")
    print("|---|---|---|---|---|---|---|---|")
    for row in PUBLISHED:
        mesh, step, seconds, result = plan(args.build_dir, args.profile, row)
        want = published_step(row)
        print(f"| {row[0]}B | {row[6]} | {mesh} | {row[7]} | {want:.2f} s | {step:.2f} s "
              f"| {100 * (step / want - 1):+.0f}% | {seconds:.1f} s, {result} |")


if __name__ == "__main__":
    main()
