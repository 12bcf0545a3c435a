#!/usr/bin/env python3
"""Training benchmarks, Tessera next to PyTorch in one run, as ratios.

Workloads (issue 3): (a) MLP 784-1024-1024-10, batch 256, SGD with momentum;
(b) CNN conv32-pool-conv64-pool-fc128-fc10, batch 128, SGD with momentum;
(c) GPT (vocab 256, context 128, d_model 256, 4 heads, 4 layers, MLP 4x,
GELU, LayerNorm), batch 16, AdamW; (d) ResNet-8 (BasicBlocks with BatchNorm,
examples/models/resnet.h), batch 128 of 3x32x32, SGD with momentum. Every (framework, model, setting) runs in
a fresh process, alternating frameworks, --repetitions times; each process
reports its median step time and its peak resident memory. We print medians.

Two settings:
  as is  : both frameworks with the environment as it is;
  tuned  : PyTorch at its best found on this machine (OMP_WAIT_POLICY=PASSIVE,
           OPENBLAS_CORETYPE unset, jemalloc preloaded with
           MALLOC_CONF=dirty_decay_ms:-1,muzzy_decay_ms:-1) against Tessera
           with only OPENBLAS_CORETYPE unset.
Both use the same thread count (--threads, default: all cores).

Speed = PyTorch step time / Tessera step time (above 1: Tessera is faster).
Memory = Tessera peak RSS / PyTorch peak RSS (below 1: Tessera uses less);
"growth" is the peak minus the resident size before the model was built,
which leaves out the size of each framework's libraries.

Usage: python3 bench/train_compare.py [--models mlp,cnn,gpt,resnet] [--repetitions 3]
"""
import argparse
import glob
import json
import os
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD = os.path.join(ROOT, "build-bench")  # --build-dir overrides
TORCH_PYTHON = "/usr/bin/python3"  # Debian's python3-torch lives here


def build(folder):
    subprocess.run(["cmake", "-S", ROOT, "-B", folder, "-G", "Ninja", "-DCMAKE_BUILD_TYPE=Release",
                    "-DTESSERA_BUILD_TESTS=OFF", "-DTESSERA_BUILD_EXAMPLES=OFF"],
                   check=True, stdout=subprocess.DEVNULL)
    subprocess.run(["cmake", "--build", folder, "-j", "2", "--target", "train_bench"], check=True)


def find_jemalloc():
    for pattern in ("/usr/lib/*/libjemalloc.so.2", "/usr/lib/libjemalloc.so.2"):
        found = glob.glob(pattern)
        if found:
            return found[0]
    return None


def run(command, env):
    result = subprocess.run(command, env=env, capture_output=True, text=True)
    if result.returncode != 0:
        sys.exit(f"benchmark failed: {' '.join(command)}\n{result.stderr}")
    return json.loads(result.stdout.strip().splitlines()[-1])


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--models", default="mlp,cnn,gpt,resnet")
    parser.add_argument("--repetitions", type=int, default=3)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    parser.add_argument("--no-build", action="store_true")
    parser.add_argument("--build-dir", default=BUILD,
                        help="build folder holding bench/train_bench (default: build-bench)")
    args = parser.parse_args()
    folder = os.path.abspath(args.build_dir)
    if not args.no_build:
        build(folder)

    base = dict(os.environ, TESSERA_NUM_THREADS=str(args.threads))
    unset = {k: v for k, v in base.items() if k != "OPENBLAS_CORETYPE"}
    best_torch = dict(unset, OMP_WAIT_POLICY="PASSIVE",
                      MALLOC_CONF="dirty_decay_ms:-1,muzzy_decay_ms:-1")
    jemalloc = find_jemalloc()
    if jemalloc:
        best_torch["LD_PRELOAD"] = jemalloc
    else:
        print("note: libjemalloc2 not found; the tuned PyTorch runs without it")
    settings = [("as is (OPENBLAS_CORETYPE=%s)" % os.environ.get("OPENBLAS_CORETYPE", "unset"),
                 base, base),
                ("tuned (PyTorch: PASSIVE + jemalloc + CORETYPE unset; Tessera: CORETYPE unset)",
                 unset, best_torch)]
    ours_cmd = [os.path.join(folder, "bench", "train_bench")]
    torch_cmd = [TORCH_PYTHON, os.path.join(ROOT, "bench", "train_torch.py")]
    common = ["--steps", str(args.steps), "--rounds", str(args.rounds),
              "--threads", str(args.threads)]

    for title, ours_env, torch_env in settings:
        print(f"\n== {title}, {args.threads} threads, median of {args.repetitions} processes")
        print(f"{'model':<6} {'Tessera ms':>11} {'PyTorch ms':>11} {'speed':>7} "
              f"{'Tessera MiB':>12} {'PyTorch MiB':>12} {'memory':>7} {'growth T/P MiB':>16} {'growth':>7}")
        for model in args.models.split(","):
            ours, theirs = [], []
            for _ in range(args.repetitions):
                ours.append(run(ours_cmd + [model] + common, ours_env))
                theirs.append(run(torch_cmd + [model] + common, torch_env))

            def med(results, key):
                return statistics.median(r[key] for r in results)

            t_ours, t_theirs = med(ours, "step_seconds"), med(theirs, "step_seconds")
            m_ours, m_theirs = med(ours, "peak_rss"), med(theirs, "peak_rss")
            g_ours, g_theirs = med(ours, "peak_rss_growth"), med(theirs, "peak_rss_growth")
            mib = 1 << 20
            print(f"{model:<6} {t_ours * 1e3:>11.2f} {t_theirs * 1e3:>11.2f} {t_theirs / t_ours:>6.2f}x "
                  f"{m_ours / mib:>12.1f} {m_theirs / mib:>12.1f} {m_ours / m_theirs:>6.2f}x "
                  f"{g_ours / mib:>7.1f}/{g_theirs / mib:<8.1f} {g_ours / g_theirs:>6.2f}x")
            sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
