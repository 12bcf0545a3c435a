#!/usr/bin/env python3
"""Graph mode, side by side in one run: Tessera eager, Tessera compiled
(graph::compile) and PyTorch, as ratios of medians.

1. The 10-op elementwise chain on 1M floats (bench/graph_bench.cpp): the
   compiled chain is one fused, tiled node. PyTorch runs it eagerly and
   through torch.jit.script (its CPU fuser).
2. Training steps (bench/train_bench.cpp --compile, bench/train_torch.py):
   the overhead-bound small MLP (64-128-128-10, batch 32, SGD) and the MLP,
   CNN and GPT of bench/train_compare.py. Also the most bytes Tessera's
   allocator held during the steps, less the parameters and the optimizer's
   state: the gradients, activations and temporaries (compiled: the arena,
   the gradient buffers and what a run allocates).
3. Compile cost (bench/train_bench.cpp --compile-times): for each model the
   seconds graph::compile spends tracing and planning its training step;
   the same with the batch dim marked dynamic (graph::dynamic: the trace
   plus two probe traces); and the re-plan for a batch of three quarters
   the size, which traces nothing.

Every (program, setting) runs in a fresh process, alternating, --repetitions
times; each process reports its own median. The tables print medians.

Usage: python3 bench/graph_compare.py [--models small_mlp,mlp,cnn,gpt] [--repetitions 3]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

from train_compare import run  # one process, its JSON line

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD = os.path.join(ROOT, "build-bench")
TORCH_PYTHON = "/usr/bin/python3"  # Debian's python3-torch lives here


def build(folder):
    subprocess.run(["cmake", "-S", ROOT, "-B", folder, "-G", "Ninja", "-DCMAKE_BUILD_TYPE=Release",
                    "-DTESSERA_BUILD_TESTS=OFF", "-DTESSERA_BUILD_EXAMPLES=OFF"],
                   check=True, stdout=subprocess.DEVNULL)
    subprocess.run(["cmake", "--build", folder, "-j", "2", "--target", "train_bench", "graph_bench"],
                   check=True)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--models", default="small_mlp,mlp,cnn,gpt")
    parser.add_argument("--repetitions", type=int, default=3)
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    parser.add_argument("--no-build", action="store_true")
    parser.add_argument("--build-dir", default=BUILD)
    args = parser.parse_args()
    folder = os.path.abspath(args.build_dir)
    if not args.no_build:
        build(folder)
    env = dict(os.environ, TESSERA_NUM_THREADS=str(args.threads))
    env.pop("OPENBLAS_CORETYPE", None)
    threads = ["--threads", str(args.threads)]

    print(f"== 10-op elementwise chain, 1M floats, {args.threads} threads, "
          f"median of {args.repetitions} processes")
    graph_bench = os.path.join(folder, "bench", "graph_bench")
    torch_chain = [TORCH_PYTHON, os.path.join(ROOT, "bench", "graph_torch.py"), "chain"]
    times = {"eager": [], "compiled": [], "torch eager": [], "torch script": []}
    for _ in range(args.repetitions):
        times["eager"].append(run([graph_bench, "chain", "--compile", "0"] + threads, env))
        times["compiled"].append(run([graph_bench, "chain", "--compile", "1"] + threads, env))
        times["torch eager"].append(run(torch_chain + ["--mode", "eager"] + threads, env))
        times["torch script"].append(run(torch_chain + ["--mode", "script"] + threads, env))
    med = {k: statistics.median(r["call_seconds"] for r in v) for k, v in times.items()}
    for name, seconds in med.items():
        print(f"{name:<14} {seconds * 1e3:8.3f} ms")
    print(f"compiled / eager time: {med['compiled'] / med['eager']:.3f}x   "
          f"PyTorch eager / compiled: {med['torch eager'] / med['compiled']:.2f}x   "
          f"PyTorch script / compiled: {med['torch script'] / med['compiled']:.2f}x")
    sys.stdout.flush()

    print(f"\n== training steps, {args.threads} threads, median of {args.repetitions} processes")
    print(f"{'model':<10} {'eager ms':>9} {'compiled ms':>12} {'PyTorch ms':>11} {'speed-up':>9} "
          f"{'vs PyTorch':>11} {'eager MiB':>10} {'compiled MiB':>13} {'memory':>7} "
          f"{'grads MiB':>10} {'beyond grads':>13}")
    print("(speed-up: eager / compiled time; vs PyTorch: PyTorch eager / Tessera compiled;\n"
          " MiB: gradients + activations + temporaries at the peak; memory: compiled / eager;\n"
          " grads: the gradients alone, the same in both; beyond grads: compiled / eager of\n"
          " the peak less the gradients)")
    train_bench = os.path.join(folder, "bench", "train_bench")

    def median(results, key):
        return statistics.median(r[key] for r in results)

    torch_train = [TORCH_PYTHON, os.path.join(ROOT, "bench", "train_torch.py")]
    for model in args.models.split(","):
        steps = ["--steps", "20" if model == "small_mlp" else "5", "--rounds", "5"]
        eager, compiled, theirs = [], [], []
        for _ in range(args.repetitions):
            eager.append(run([train_bench, model, "--compile", "0"] + steps + threads, env))
            compiled.append(run([train_bench, model, "--compile", "1"] + steps + threads, env))
            theirs.append(run(torch_train + [model] + steps + threads, env))

        t_eager, t_compiled = median(eager, "step_seconds"), median(compiled, "step_seconds")
        t_torch = median(theirs, "step_seconds")
        m_eager, m_compiled = median(eager, "step_peak_bytes"), median(compiled, "step_peak_bytes")
        grads = median(eager, "grad_bytes")
        mib = 1 << 20
        print(f"{model:<10} {t_eager * 1e3:>9.3f} {t_compiled * 1e3:>12.3f} {t_torch * 1e3:>11.3f} "
              f"{t_eager / t_compiled:>8.2f}x {t_torch / t_compiled:>10.2f}x "
              f"{m_eager / mib:>10.2f} {m_compiled / mib:>13.2f} "
              f"{(m_compiled / m_eager if m_eager else float('nan')):>6.2f}x "
              f"{grads / mib:>10.2f} "
              f"{((m_compiled - grads) / (m_eager - grads) if m_eager > grads else float('nan')):>12.2f}x")
        sys.stdout.flush()

    print(f"\n== compile cost of the training step, median of {args.repetitions} processes "
          "(each the median of 5 compiles)")
    print(f"{'model':<10} {'nodes':>6} {'compile ms':>11} {'dynamic ms':>11} {'re-plan ms':>11} "
          f"{'re-plan/compile':>16} {'re-plan/dynamic':>16}")
    for model in [m for m in args.models.split(",") if m]:
        results = [run([train_bench, model, "--compile-times", "1", "--rounds", "5"] + threads, env)
                   for _ in range(args.repetitions)]
        compile_s = median(results, "compile_seconds")
        dynamic_s = median(results, "dynamic_compile_seconds")
        replan_s = median(results, "replan_seconds")
        print(f"{model:<10} {results[0]['nodes']:>6} {compile_s * 1e3:>11.2f} {dynamic_s * 1e3:>11.2f} "
              f"{replan_s * 1e3:>11.2f} {replan_s / compile_s:>15.2f}x {replan_s / dynamic_s:>15.2f}x")
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
