#!/usr/bin/env python3
"""Seconds per Fashion-MNIST epoch: the Tessera example next to its PyTorch
twin (bench/fashion_mnist_torch.py), same model, batch, optimizer and thread
count, alternating fresh processes; prints medians and the ratio.

Usage: python3 bench/fashion_mnist_compare.py [--repetitions 3] [--threads T]
       [--build-dir build]
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TORCH_PYTHON = "/usr/bin/python3"  # Debian's python3-torch lives here


def tessera_epoch(binary, threads):
    with tempfile.TemporaryDirectory() as folder:
        result = subprocess.run(
            [binary, "--epochs", "1", "--checkpoint", os.path.join(folder, "ckpt.safetensors")],
            env=dict(os.environ, TESSERA_NUM_THREADS=str(threads)),
            capture_output=True, text=True)
    if result.returncode != 0:
        sys.exit(f"fashion_mnist failed:\n{result.stderr}")
    found = re.search(r"epoch 1: ([0-9.]+) s, test accuracy ([0-9.]+)%", result.stdout)
    if not found:
        sys.exit(f"could not read the epoch time from:\n{result.stdout}")
    return float(found.group(1)), float(found.group(2)) / 100


def torch_epoch(threads):
    result = subprocess.run(
        [TORCH_PYTHON, os.path.join(ROOT, "bench", "fashion_mnist_torch.py"),
         "--threads", str(threads)], capture_output=True, text=True)
    if result.returncode != 0:
        sys.exit(f"fashion_mnist_torch.py failed:\n{result.stderr}")
    report = json.loads(result.stdout.strip().splitlines()[-1])
    return report["epoch_seconds"], report["test_accuracy"]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--repetitions", type=int, default=3)
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    parser.add_argument("--build-dir", default=os.path.join(ROOT, "build"))
    args = parser.parse_args()
    build = os.path.abspath(args.build_dir)
    subprocess.run(["cmake", "-S", ROOT, "-B", build, "-G", "Ninja", "-DCMAKE_BUILD_TYPE=Release"],
                   check=True, stdout=subprocess.DEVNULL)
    subprocess.run(["cmake", "--build", build, "-j", "2", "--target", "fashion_mnist"], check=True)
    binary = os.path.join(build, "examples", "fashion_mnist")

    ours, theirs = [], []
    for _ in range(args.repetitions):
        ours.append(tessera_epoch(binary, args.threads))
        theirs.append(torch_epoch(args.threads))
    t_ours = statistics.median(s for s, _ in ours)
    t_theirs = statistics.median(s for s, _ in theirs)
    print(f"Fashion-MNIST, one epoch, {args.threads} threads, median of {args.repetitions}:")
    print(f"  Tessera {t_ours:.1f} s (accuracy after 1 epoch {ours[-1][1]:.2%}), "
          f"PyTorch {t_theirs:.1f} s (accuracy {theirs[-1][1]:.2%}), "
          f"speed {t_theirs / t_ours:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
