#!/usr/bin/env python3
"""PyTorch's side of the data-parallel benchmark: the same MLP 784-1024-1024-10
(batch 256) or ResNet-8 (bench/train_torch.py's, batch 128 of 3x32x32; BatchNorm
with per-rank statistics, DDP's behaviour), split over the ranks, SGD with momentum,
or bench/train_torch.py's GPT (batch 16 x 128 tokens) with AdamW, under
DistributedDataParallel with the gloo backend. Same timing rule as
bench/dp_bench.cpp (median over steps of the slowest rank). Runs under
tessera-run, which sets RANK, WORLD_SIZE and TESSERA_RDZV.

Usage: tessera-run -n 2 python3 bench/dp_torch.py [--model mlp|resnet|gpt] [--steps 30] [--warmup 5]
"""
import argparse
import json
import os
import statistics
import sys
import time

import torch
import torch.distributed as dist
import torch.nn as nn


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--model", choices=["mlp", "resnet", "gpt"], default="mlp")
    args = parser.parse_args()
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    torch.set_num_threads(max(1, os.cpu_count() // int(os.environ.get("LOCAL_WORLD_SIZE", 1))))
    folder = os.environ["TESSERA_RDZV"][len("file://"):]
    dist.init_process_group("gloo", init_method=f"file://{folder}/torch_store", rank=rank,
                            world_size=world)
    torch.manual_seed(0)
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    if args.model == "resnet":
        from train_torch import ResNet
        model, batch, sample = ResNet(), 128, (3, 32, 32)
    elif args.model == "gpt":
        from train_torch import GPT, LanguageModelLoss
        model, batch = GPT(), 16
    else:
        model = nn.Sequential(nn.Linear(784, 1024), nn.ReLU(), nn.Linear(1024, 1024), nn.ReLU(),
                              nn.Linear(1024, 10))
        batch, sample = 256, (784,)
    ddp = nn.parallel.DistributedDataParallel(model)
    rows = batch // world + (1 if rank < batch % world else 0)
    generator = torch.Generator().manual_seed(1 + rank)
    if args.model == "gpt":
        optimizer = torch.optim.AdamW(ddp.parameters(), lr=3e-4)
        x = torch.randint(0, 256, (rows, 128), generator=generator)
        y = torch.randint(0, 256, (rows, 128), generator=generator)
        loss_fn = LanguageModelLoss()
    else:
        optimizer = torch.optim.SGD(ddp.parameters(), lr=0.01, momentum=0.9)
        x = torch.randn(rows, *sample, generator=generator)
        y = torch.randint(0, 10, (rows,), generator=generator)
        loss_fn = nn.CrossEntropyLoss()
    times = []
    for step in range(args.warmup + args.steps):
        dist.barrier()
        start = time.perf_counter()
        optimizer.zero_grad(set_to_none=True)
        loss = loss_fn(ddp(x), y)
        loss.backward()
        optimizer.step()
        if step >= args.warmup:
            times.append(time.perf_counter() - start)
    slowest = torch.tensor(times, dtype=torch.float64)
    dist.all_reduce(slowest, op=dist.ReduceOp.MAX)
    if rank == 0:
        print(json.dumps({"framework": "pytorch", "ranks": world,
                          "step_ms": 1e3 * statistics.median(slowest.tolist()),
                          "loss": loss.item()}), flush=True)


if __name__ == "__main__":
    main()
