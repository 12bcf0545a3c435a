#!/usr/bin/env python3
"""Runs Tessera's and PyTorch's (libtorch) benchmarks side by side and prints ratios.

Both programs use the same Google Benchmark harness, workloads and thread
count. Each runs twice: with the environment as it is, and with
OPENBLAS_CORETYPE unset for both (PyTorch also with OMP_WAIT_POLICY=PASSIVE,
its best setting on this machine). Every number is the median of
--repetitions runs.

Usage: python3 bench/compare.py [--repetitions 5] [--threads 2] [--filter REGEX]
"""
import argparse
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD = os.path.join(ROOT, "build-bench")


def build():
    subprocess.run(["cmake", "-S", ROOT, "-B", BUILD, "-G", "Ninja", "-DCMAKE_BUILD_TYPE=Release",
                    "-DTESSERA_BUILD_TESTS=OFF", "-DTESSERA_BUILD_EXAMPLES=OFF",
                    "-DTESSERA_BENCH_TORCH=ON"], check=True, stdout=subprocess.DEVNULL)
    subprocess.run(["cmake", "--build", BUILD, "-j", "2", "--target", "ops_bench", "torch_bench"],
                   check=True)


def run(binary, env, repetitions, pattern):
    command = [os.path.join(BUILD, "bench", binary), "--benchmark_format=json",
               f"--benchmark_repetitions={repetitions}", "--benchmark_report_aggregates_only=true",
               f"--benchmark_filter={pattern}"]
    output = subprocess.run(command, env=env, check=True, capture_output=True, text=True).stdout
    medians = {}
    for entry in json.loads(output)["benchmarks"]:
        # A single repetition has no aggregates: its one run stands for the median.
        single_run = repetitions == 1 and entry.get("run_type") == "iteration"
        if entry.get("aggregate_name") == "median" or single_run:
            name = entry["run_name"]
            scale = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}[entry["time_unit"]]
            medians[name] = {"seconds": entry["real_time"] * scale,
                             "bytes_per_second": entry.get("bytes_per_second")}
    return medians


def row(name, tessera, torch, note=""):
    speedup = torch / tessera if tessera > 0 else float("nan")
    return f"{name:<34} {tessera * 1e6:>12.2f} {torch * 1e6:>12.2f} {speedup:>8.2f}x  {note}"


def report(title, ours, theirs):
    print(f"\n== {title}")
    print(f"{'workload':<34} {'Tessera us':>12} {'PyTorch us':>12} {'speed':>9}  (speed = PyTorch time / Tessera time)")
    for name in sorted(ours):
        if name in theirs:
            print(row(name, ours[name]["seconds"], theirs[name]["seconds"]))
    copy = ours.get("BM_memcpy/16777216/real_time")
    if copy and copy["bytes_per_second"]:
        for name in ("BM_add/16777216/real_time", "BM_mul/16777216/real_time", "BM_gelu/16777216/real_time"):
            if name in ours and ours[name]["bytes_per_second"]:
                share = ours[name]["bytes_per_second"] / copy["bytes_per_second"]
                print(f"{name:<34} reaches {share:.2f} of measured copy bandwidth "
                      f"({copy['bytes_per_second'] / 1e9:.1f} GB/s)")
    check = ours.get("BM_view_bounds_check")
    if check:
        for name in ("BM_view_transpose", "BM_view_slice"):
            if name in ours:
                print(f"{name:<34} of which the bounds check: {check['seconds'] * 1e9:.1f} ns "
                      f"({check['seconds'] / ours[name]['seconds']:.0%})")
    for size in (256, 1024, 2048):
        mine = ours.get(f"BM_matmul/{size}/real_time")
        blas = ours.get(f"BM_openblas_sgemm/{size}/real_time")
        if mine and blas:
            print(f"matmul {size}: Tessera / OpenBLAS direct = {blas['seconds'] / mine['seconds']:.2f}")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--repetitions", type=int, default=5)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--filter", default=".")
    parser.add_argument("--no-build", action="store_true")
    args = parser.parse_args()
    if not args.no_build:
        build()

    base = dict(os.environ, TESSERA_NUM_THREADS=str(args.threads), OMP_NUM_THREADS=str(args.threads))
    tuned = {k: v for k, v in base.items() if k not in ("OPENBLAS_CORETYPE",)}
    tuned_torch = dict(tuned, OMP_WAIT_POLICY="PASSIVE")
    settings = [
        ("environment as is (OPENBLAS_CORETYPE=%s)" % os.environ.get("OPENBLAS_CORETYPE", "unset"),
         base, base),
        ("OPENBLAS_CORETYPE unset for both; PyTorch with OMP_WAIT_POLICY=PASSIVE", tuned, tuned_torch),
    ]
    for title, ours_env, torch_env in settings:
        ours = run("ops_bench", ours_env, args.repetitions, args.filter)
        theirs = run("torch_bench", torch_env, args.repetitions, args.filter)
        report(title, ours, theirs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
