#!/usr/bin/env python3
"""PyTorch's side of bench/graph_compare.py: the 10-op elementwise chain of
bench/graph_bench.cpp on 1M floats, eagerly and (where this PyTorch has a
working compiler) through torch.jit.script, whose CPU fuser is PyTorch's
graph-mode answer without a C++ toolchain. Prints one JSON line.

Usage: python3 bench/graph_torch.py chain [--mode eager|script] [--calls N] [--rounds R] [--threads T]
"""
import argparse
import json
import statistics
import time

import torch


def chain(x):
    t = x * 1.5
    t = t + 0.25
    t = torch.relu(t)
    t = t * 0.75
    t = t - 0.5
    t = torch.abs(t)
    t = t + 1.0
    t = torch.sqrt(t)
    t = t * 2.0
    return torch.neg(t)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("workload", choices=["chain"])
    parser.add_argument("--mode", choices=["eager", "script"], default="eager")
    parser.add_argument("--calls", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--threads", type=int, default=0)
    args = parser.parse_args()
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    x = torch.randn(1 << 20)
    fn = chain
    if args.mode == "script":
        fn = torch.jit.script(chain)
    with torch.no_grad():
        for _ in range(5):
            fn(x)
        rounds = []
        for _ in range(args.rounds):
            start = time.perf_counter()
            for _ in range(args.calls):
                fn(x)
            rounds.append((time.perf_counter() - start) / args.calls)
    print(json.dumps({"framework": "pytorch", "workload": "chain", "mode": args.mode,
                      "call_seconds": statistics.median(rounds),
                      "threads": torch.get_num_threads()}))


if __name__ == "__main__":
    main()
