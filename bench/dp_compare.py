#!/usr/bin/env python3
"""Data-parallel step time of the MLP, ResNet-8 (BatchNorm) and the GPT, Tessera
(broadcast parameters, split batch) next to PyTorch DDP (gloo), in one run:
alternating fresh jobs of each, medians over jobs. For ResNet-8 Tessera
runs with global BatchNorm statistics (its default, equal to one process)
and with per-rank ones (--bn per-rank, what DDP does). Tessera runs on each transport it has on one machine:
  gloo+shm  tessera-run, Gloo groups with shared-memory all_reduce (default)
  gloo-tcp  tessera-run with TESSERA_SHARED_MEMORY=0 (Gloo over TCP only)
  mpi       mpirun, the MPI backend (when mpirun is installed)
and, on gloo+shm, with the whole step compiled (graph::compile). Prints each
median step and the ratio PyTorch time / Tessera time (above 1 means Tessera
is faster), and compiled against eager.

Usage: python3 bench/dp_compare.py [--models mlp,resnet,gpt] [--jobs 5] [--ranks 2] [--steps 30]
                                   [--build-dir build] [--no-build]
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
    parser.add_argument("--jobs", type=int, default=5)
    parser.add_argument("--ranks", type=int, default=2)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--build-dir", default=os.path.join(ROOT, "build"))
    parser.add_argument("--mpirun-args", default="--oversubscribe --bind-to none --mca btl self,vader")
    parser.add_argument("--models", default="mlp,resnet")
    parser.add_argument("--no-build", action="store_true")
    args = parser.parse_args()
    build = os.path.abspath(args.build_dir)
    if not args.no_build:
        subprocess.run(["cmake", "-S", ROOT, "-B", build, "-G", "Ninja",
                        "-DCMAKE_BUILD_TYPE=Release"], check=True, stdout=subprocess.DEVNULL)
        subprocess.run(["cmake", "--build", build, "-j", "2", "--target", "dp_bench", "tessera-run"],
                       check=True, stdout=subprocess.DEVNULL)
    for model in args.models.split(","):
        compare(model, args, build)


def compare(model, args, build):
    launcher = [os.path.join(build, "tools", "tessera-run"), "-n", str(args.ranks)]
    bench = [os.path.join(build, "bench", "dp_bench"), "--steps", str(args.steps),
             "--model", model]
    commands = {
        "pytorch": launcher + [TORCH_PYTHON, os.path.join(ROOT, "bench", "dp_torch.py"),
                               "--steps", str(args.steps), "--model", model],
        "gloo+shm": launcher + bench,
        "gloo+shm compiled": launcher + bench + ["--compile", "1"],
        "gloo-tcp": ["env", "TESSERA_SHARED_MEMORY=0"] + launcher + bench,
    }
    if model == "resnet":
        commands["gloo+shm per-rank BN"] = launcher + bench + ["--bn", "per-rank"]
    if shutil.which("mpirun") is not None:
        mpirun = ["mpirun"] + shlex.split(args.mpirun_args)
        if os.geteuid() == 0:
            mpirun.append("--allow-run-as-root")
        commands["mpi"] = ["env", "TESSERA_BACKEND=mpi"] + mpirun + ["-n", str(args.ranks)] + bench
    else:
        print("mpirun not found (Debian: openmpi-bin); skipping the MPI backend")
    times = {name: [] for name in commands}
    for _ in range(args.jobs):
        for name, command in commands.items():
            times[name].append(run(command)["step_ms"])
    pytorch = statistics.median(times["pytorch"])
    title = {"mlp": "MLP 784-1024-1024-10, batch 256",
             "resnet": "ResNet-8 (BatchNorm), batch 128 of 3x32x32",
             "gpt": "GPT (4 layers, d 256), batch 16 x 128 tokens"}[model]
    print(f"data-parallel {title} over {args.ranks} ranks, "
          f"{'AdamW' if model == 'gpt' else 'SGD momentum'}")
    print(f"  pytorch DDP (gloo) {pytorch:.2f} ms/step   jobs {[round(t, 2) for t in times['pytorch']]}")
    for name in commands:
        if name == "pytorch":
            continue
        tessera = statistics.median(times[name])
        print(f"  tessera {name:20s} {tessera:.2f} ms/step   ratio (pytorch / tessera) "
              f"{pytorch / tessera:.2f}x   jobs {[round(t, 2) for t in times[name]]}")
    eager, compiled = statistics.median(times["gloo+shm"]), statistics.median(times["gloo+shm compiled"])
    print(f"  compiled / eager (gloo+shm): {eager / compiled:.2f}x the steps per second")


if __name__ == "__main__":
    main()
