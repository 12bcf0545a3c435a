#!/usr/bin/env python3
"""Data-parallel MLP step time, Tessera (broadcast parameters, split batch)
next to PyTorch DDP (gloo), in one run: alternating fresh jobs of each under
tessera-run, medians over jobs. Prints each framework's median step and the
ratio PyTorch time / Tessera time (above 1 means Tessera is faster).

Usage: python3 bench/dp_compare.py [--jobs 3] [--ranks 2] [--steps 30] [--build-dir build]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TORCH_PYTHON = "/usr/bin/python3"  # Debian's python3-torch lives here


def run(command):
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        sys.exit(f"benchmark failed: {' '.join(command)}\n{result.stdout}\n{result.stderr}")
    for line in result.stdout.splitlines():
        text = line.split("] ", 1)[-1]
        if text.startswith("{"):
            return json.loads(text)
    sys.exit(f"no result from {' '.join(command)}\n{result.stdout}")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--jobs", type=int, default=3)
    parser.add_argument("--ranks", type=int, default=2)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--build-dir", default=os.path.join(ROOT, "build"))
    args = parser.parse_args()
    build = os.path.abspath(args.build_dir)
    subprocess.run(["cmake", "-S", ROOT, "-B", build, "-G", "Ninja", "-DCMAKE_BUILD_TYPE=Release"],
                   check=True, stdout=subprocess.DEVNULL)
    subprocess.run(["cmake", "--build", build, "-j", "2", "--target", "dp_bench", "tessera-run"],
                   check=True, stdout=subprocess.DEVNULL)
    launcher = [os.path.join(build, "tools", "tessera-run"), "-n", str(args.ranks)]
    steps = ["--steps", str(args.steps)]
    times = {"tessera": [], "pytorch": []}
    for _ in range(args.jobs):
        times["tessera"].append(run(launcher + [os.path.join(build, "bench", "dp_bench")] + steps)["step_ms"])
        times["pytorch"].append(run(launcher + [TORCH_PYTHON, os.path.join(ROOT, "bench", "dp_torch.py")] + steps)["step_ms"])
    tessera, pytorch = statistics.median(times["tessera"]), statistics.median(times["pytorch"])
    print(f"data-parallel MLP 784-1024-1024-10, batch 256 over {args.ranks} ranks, SGD momentum")
    print(f"  tessera {tessera:.2f} ms/step   pytorch DDP {pytorch:.2f} ms/step   "
          f"ratio (pytorch / tessera) {pytorch / tessera:.2f}x")
    print(f"  jobs: tessera {times['tessera']}  pytorch {times['pytorch']}")


if __name__ == "__main__":
    main()
