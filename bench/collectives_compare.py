#!/usr/bin/env python3
"""Collective bandwidth, each Tessera backend next to torch.distributed
(gloo), in one run: all_reduce, all_gather, reduce_scatter and all_to_all
of 1, 16 and 64 MiB per rank on 2 and 4 local ranks. Tessera's Gloo
backend and PyTorch run under tessera-run, Tessera's MPI backend under
mpirun (shared memory: the vader BTL); fresh jobs alternate. Prints medians and ratios (PyTorch
time / Tessera time, so above 1 means Tessera moves the data faster).

Usage: python3 bench/collectives_compare.py [--jobs 3] [--repetitions 10]
       [--ranks 2,4] [--backends gloo,mpi] [--mpirun-args "..."] [--build-dir build]
"""
import argparse
import json
import os
import shlex
import shutil
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TORCH_PYTHON = "/usr/bin/python3"  # Debian's python3-torch lives here
# Shared memory only, and no binding: more ranks than cores share them.
MPIRUN_ARGS = "--oversubscribe --bind-to none --mca btl self,vader"


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
    parser.add_argument("--backends", default="gloo,mpi")
    parser.add_argument("--mpirun-args", default=MPIRUN_ARGS,
                        help="options for mpirun (MCA settings: --mca name value)")
    parser.add_argument("--build-dir", default=os.path.join(ROOT, "build"))
    args = parser.parse_args()
    build = os.path.abspath(args.build_dir)
    backends = args.backends.split(",")
    if "mpi" in backends and shutil.which("mpirun") is None:
        print("mpirun not found (Debian: openmpi-bin); skipping the MPI backend")
        backends.remove("mpi")
    subprocess.run(["cmake", "-S", ROOT, "-B", build, "-G", "Ninja", "-DCMAKE_BUILD_TYPE=Release"],
                   check=True, stdout=subprocess.DEVNULL)
    subprocess.run(["cmake", "--build", build, "-j", "2", "--target", "collectives_bench",
                    "tessera-run"], check=True, stdout=subprocess.DEVNULL)
    launcher = os.path.join(build, "tools", "tessera-run")
    bench = os.path.join(build, "bench", "collectives_bench")
    reps = ["--repetitions", str(args.repetitions)]
    mpirun = ["mpirun"] + shlex.split(args.mpirun_args)
    if os.geteuid() == 0:
        mpirun.append("--allow-run-as-root")

    def commands(ranks):
        yield "pytorch", [launcher, "-n", str(ranks), TORCH_PYTHON,
                          os.path.join(ROOT, "bench", "collectives_torch.py")] + reps
        for backend in backends:
            if backend == "mpi":
                # TESSERA_BACKEND is read by the ranks; mpirun passes the environment on.
                yield "mpi", ["env", "TESSERA_BACKEND=mpi"] + mpirun + ["-n", str(ranks), bench] + reps
            else:
                yield backend, ["env", f"TESSERA_BACKEND={backend}", launcher, "-n", str(ranks),
                                bench] + reps

    for ranks in (int(r) for r in args.ranks.split(",")):
        times = {}
        for _ in range(args.jobs):
            for name, command in commands(ranks):
                for row in run(command):
                    times.setdefault((row["op"], row["mib"], name), []).append(row["seconds"])
        print(f"\n== {ranks} ranks, median of {args.jobs} jobs x {args.repetitions} repetitions; "
              "ratio = PyTorch time / Tessera time")
        header = f"{'op':<15} {'MiB':>4} {'PyTorch ms':>11}"
        for backend in backends:
            header += f" {backend + ' ms':>10} {backend + ' x':>8}"
        print(header)
        for op in ("all_reduce", "all_gather", "reduce_scatter", "all_to_all"):
            for mib in (1, 16, 64):
                theirs = statistics.median(times[(op, mib, "pytorch")])
                line = f"{op:<15} {mib:>4} {theirs * 1e3:>11.2f}"
                for backend in backends:
                    ours = statistics.median(times[(op, mib, backend)])
                    line += f" {ours * 1e3:>10.2f} {theirs / ours:>7.2f}x"
                print(line)
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
