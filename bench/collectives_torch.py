#!/usr/bin/env python3
"""PyTorch's side of the collective benchmarks: torch.distributed with the
gloo backend, the same ops, sizes, repetitions and timing rule as
bench/collectives_bench.cpp (median over repetitions of the slowest rank).
Runs under tessera-run, which sets RANK, WORLD_SIZE and TESSERA_RDZV.

Usage: tessera-run -n 2 python3 bench/collectives_torch.py [--repetitions 10]
"""
import argparse
import json
import os
import statistics
import time

import torch
import torch.distributed as dist


def median_seconds(repetitions, fn):
    fn()
    times = []
    for _ in range(repetitions):
        dist.barrier()
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    slowest = torch.tensor(times, dtype=torch.float64)
    dist.all_reduce(slowest, op=dist.ReduceOp.MAX)
    return statistics.median(slowest.tolist())


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--repetitions", type=int, default=10)
    args = parser.parse_args()
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    # The ranks share the cores, as torchrun arranges (and Tessera by default).
    torch.set_num_threads(max(1, os.cpu_count() // int(os.environ.get("LOCAL_WORLD_SIZE", 1))))
    folder = os.environ["TESSERA_RDZV"][len("file://"):]
    dist.init_process_group("gloo", init_method=f"file://{folder}/torch_store", rank=rank,
                            world_size=world)
    for mib in (1, 16, 64):
        count = mib * (1 << 20) // 4
        data = torch.full((count,), float(rank + 1))
        outputs = [torch.empty(count) for _ in range(world)]
        pieces = [torch.ones(count // world) for _ in range(world)]
        out_piece = torch.empty(count // world)
        exchanged = torch.empty(count)
        results = {
            "all_reduce": median_seconds(args.repetitions, lambda: dist.all_reduce(data.clone())),
            "all_gather": median_seconds(args.repetitions,
                                         lambda: dist.all_gather(outputs, data)),
            # gloo has no reduce_scatter in PyTorch 1.13: all_reduce of the
            # concatenation, keeping this rank's piece, is what users do.
            "reduce_scatter": median_seconds(
                args.repetitions,
                lambda: out_piece.copy_(_reduce_scatter(pieces, rank))),
            # One tensor split evenly among the ranks, as Tessera's pieces.
            "all_to_all": median_seconds(
                args.repetitions, lambda: dist.all_to_all_single(exchanged, data)),
        }
        if rank == 0:
            for op, seconds in results.items():
                print(json.dumps({"framework": "pytorch", "op": op, "mib": mib, "ranks": world,
                                  "seconds": seconds}), flush=True)
    dist.destroy_process_group()


def _reduce_scatter(pieces, rank):
    joined = torch.cat(pieces)
    dist.all_reduce(joined)
    return joined.chunk(len(pieces))[rank]


if __name__ == "__main__":
    main()
