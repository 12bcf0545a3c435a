#!/usr/bin/env python3
"""Collective bandwidth, Tessera's Gloo backend next to torch.distributed
(gloo), in one run: all_reduce, all_gather and reduce_scatter of 1, 16 and
64 MiB per rank on 2 and 4 local ranks, both launched by tessera-run,
alternating fresh jobs; prints medians and ratios (PyTorch time / Tessera
time, so above 1 means Tessera moves the data faster).

Usage: python3 bench/collectives_compare.py [--jobs 3] [--repetitions 10]
       [--ranks 2,4] [--build-dir build]
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
    rows = []
    for line in result.stdout.splitlines():
        text = line.split("] ", 1)[-1]  # drop tessera-run's "[rank 0] " prefix
        if text.startswith("{"):
            rows.append(json.loads(text))
    return rows


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--jobs", type=int, default=3)
    parser.add_argument("--repetitions", type=int, default=10)
    parser.add_argument("--ranks", default="2,4")
    parser.add_argument("--build-dir", default=os.path.join(ROOT, "build"))
    args = parser.parse_args()
    build = os.path.abspath(args.build_dir)
    subprocess.run(["cmake", "-S", ROOT, "-B", build, "-G", "Ninja", "-DCMAKE_BUILD_TYPE=Release"],
                   check=True, stdout=subprocess.DEVNULL)
    subprocess.run(["cmake", "--build", build, "-j", "2", "--target", "collectives_bench",
                    "tessera-run"], check=True, stdout=subprocess.DEVNULL)
    launcher = os.path.join(build, "tools", "tessera-run")
    reps = ["--repetitions", str(args.repetitions)]

    for ranks in (int(r) for r in args.ranks.split(",")):
        times = {}
        for _ in range(args.jobs):
            for framework, program in (
                    ("tessera", [os.path.join(build, "bench", "collectives_bench")]),
                    ("pytorch", [TORCH_PYTHON, os.path.join(ROOT, "bench", "collectives_torch.py")])):
                for row in run([launcher, "-n", str(ranks)] + program + reps):
                    times.setdefault((row["op"], row["mib"], framework), []).append(row["seconds"])
        print(f"\n== {ranks} ranks, median of {args.jobs} jobs x {args.repetitions} repetitions")
        print(f"{'op':<15} {'MiB':>4} {'Tessera ms':>11} {'PyTorch ms':>11} {'ratio':>7}")
        for op in ("all_reduce", "all_gather", "reduce_scatter"):
            for mib in (1, 16, 64):
                ours = statistics.median(times[(op, mib, "tessera")])
                theirs = statistics.median(times[(op, mib, "pytorch")])
                print(f"{op:<15} {mib:>4} {ours * 1e3:>11.2f} {theirs * 1e3:>11.2f} "
                      f"{theirs / ours:>6.2f}x")
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
