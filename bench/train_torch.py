#!/usr/bin/env python3
"""PyTorch's side of the training benchmarks (bench/train_compare.py runs it).

Same models, batch sizes, optimizers and step counts as bench/train_bench.cpp.
Prints one JSON line: the median step time over the timed rounds and memory
figures (peak resident set size of the process, and its growth over the
resident size before the model was built).

Usage: python3 bench/train_torch.py MODEL [--steps N] [--rounds R] [--threads T]
MODEL is mlp, small_mlp, cnn, resnet or gpt.
"""
import argparse
import json
import resource
import statistics
import time

import torch
import torch.nn as nn


def rss_bytes():
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def mlp():
    model = nn.Sequential(nn.Linear(784, 1024), nn.ReLU(), nn.Linear(1024, 1024), nn.ReLU(),
                          nn.Linear(1024, 10))
    x = torch.randn(256, 784)
    y = torch.randint(0, 10, (256,))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    return model, x, y, optimizer, nn.CrossEntropyLoss()


def small_mlp():
    """Overhead-bound: 64-128-128-10, batch 32, plain SGD."""
    model = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 128), nn.ReLU(),
                          nn.Linear(128, 10))
    x = torch.randn(32, 64)
    y = torch.randint(0, 10, (32,))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    return model, x, y, optimizer, nn.CrossEntropyLoss()


def cnn():
    model = nn.Sequential(
        nn.Conv2d(1, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(64 * 7 * 7, 128), nn.ReLU(), nn.Linear(128, 10))
    x = torch.randn(128, 1, 28, 28)
    y = torch.randint(0, 10, (128,))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    return model, x, y, optimizer, nn.CrossEntropyLoss()


class BasicBlock(nn.Module):
    def __init__(self, in_channels, channels, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(in_channels, channels, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(channels)
        self.conv2 = nn.Conv2d(channels, channels, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(channels)
        self.downsample = None
        if stride != 1 or in_channels != channels:
            self.downsample = nn.Sequential(nn.Conv2d(in_channels, channels, 1, stride, bias=False),
                                            nn.BatchNorm2d(channels))

    def forward(self, x):
        out = torch.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        identity = self.downsample(x) if self.downsample is not None else x
        return torch.relu(out + identity)


class ResNet(nn.Module):
    """examples/models/resnet.h: stem, three stages of BasicBlocks (16, 32, 64), pool, fc."""

    def __init__(self, blocks_per_stage=1, num_classes=10):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 16, 3, 1, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(16)
        stages, in_channels = [], 16
        for stage, width in enumerate((16, 32, 64)):
            blocks = []
            for block in range(blocks_per_stage):
                blocks.append(BasicBlock(in_channels, width, 2 if stage > 0 and block == 0 else 1))
                in_channels = width
            stages.append(nn.Sequential(*blocks))
        self.layer1, self.layer2, self.layer3 = stages
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(64, num_classes)

    def forward(self, x):
        h = torch.relu(self.bn1(self.conv1(x)))
        h = self.layer3(self.layer2(self.layer1(h)))
        return self.fc(torch.flatten(self.avgpool(h), 1))


def resnet():
    model = ResNet()
    x = torch.randn(128, 3, 32, 32)
    y = torch.randint(0, 10, (128,))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    return model, x, y, optimizer, nn.CrossEntropyLoss()


class GPT(nn.Module):
    def __init__(self, vocab=256, context=128, d_model=256, heads=4, layers=4):
        super().__init__()
        self.token = nn.Embedding(vocab, d_model)
        self.position = nn.Embedding(context, d_model)
        self.blocks = nn.ModuleList([
            nn.TransformerEncoderLayer(d_model, heads, 4 * d_model, dropout=0.0,
                                       activation="gelu", batch_first=True, norm_first=True)
            for _ in range(layers)])
        self.norm = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, vocab)
        mask = torch.triu(torch.full((context, context), float("-inf")), diagonal=1)
        self.register_buffer("mask", mask, persistent=False)

    def forward(self, tokens):
        t = tokens.shape[1]
        h = self.token(tokens) + self.position(torch.arange(t))
        for block in self.blocks:
            h = block(h, src_mask=self.mask[:t, :t])
        return self.head(self.norm(h))


class LanguageModelLoss(nn.Module):
    def forward(self, logits, targets):
        return nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]),
                                           targets.reshape(-1))


def gpt():
    model = GPT()
    x = torch.randint(0, 256, (16, 128))
    y = torch.randint(0, 256, (16, 128))
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4)
    return model, x, y, optimizer, LanguageModelLoss()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("model", choices=["mlp", "small_mlp", "cnn", "resnet", "gpt"])
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--threads", type=int, default=0)
    args = parser.parse_args()
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    rss_before = rss_bytes()
    model, x, y, optimizer, loss_fn = {"mlp": mlp, "small_mlp": small_mlp, "cnn": cnn, "resnet": resnet,
                                        "gpt": gpt}[args.model]()

    def step():
        optimizer.zero_grad(set_to_none=True)
        loss = loss_fn(model(x), y)
        loss.backward()
        optimizer.step()
        return loss

    for _ in range(3):
        step()
    rounds = []
    for _ in range(args.rounds):
        start = time.perf_counter()
        for _ in range(args.steps):
            step()
        rounds.append((time.perf_counter() - start) / args.steps)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    print(json.dumps({"framework": "pytorch", "model": args.model, "batch": int(x.shape[0]),
                      "step_seconds": statistics.median(rounds), "peak_rss": peak,
                      "peak_rss_growth": peak - rss_before,
                      "threads": torch.get_num_threads()}))


if __name__ == "__main__":
    main()
