#!/usr/bin/env python3
"""PyTorch twin of examples/fashion_mnist: the same CNN, batch size,
optimizer, data and normalisation, trained for one epoch. Prints the epoch's
seconds and the test accuracy as JSON (bench/fashion_mnist_compare.py runs it
next to the Tessera example).

Usage: python3 bench/fashion_mnist_torch.py [--data DIR] [--batch-size 128]
       [--lr 0.001] [--threads T]
"""
import argparse
import gzip
import json
import os
import struct
import time

import numpy as np
import torch
import torch.nn as nn

MEAN, STD = 0.2860, 0.3530  # the Fashion-MNIST statistics the example uses


def read_idx(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        data = f.read()
    ndims = data[3]
    dims = struct.unpack(">" + "I" * ndims, data[4:4 + 4 * ndims])
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * ndims).reshape(dims)


def load(root, prefix):
    def find(name):
        path = os.path.join(root, name)
        return path + ".gz" if os.path.exists(path + ".gz") else path
    images = read_idx(find(f"{prefix}-images-idx3-ubyte"))
    labels = read_idx(find(f"{prefix}-labels-idx1-ubyte"))
    x = (torch.from_numpy(images.astype(np.float32)) / 255.0 - MEAN) / STD
    return x.unsqueeze(1), torch.from_numpy(labels.astype(np.int64))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--data", default=os.environ.get("TESSERA_FASHION_MNIST",
                                                         "/usr/share/datasets/fashion-mnist"))
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)

    train_x, train_y = load(args.data, "train")
    test_x, test_y = load(args.data, "t10k")
    model = nn.Sequential(
        nn.Conv2d(1, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(64 * 7 * 7, 128), nn.ReLU(), nn.Linear(128, 10))
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
    loss_fn = nn.CrossEntropyLoss()

    start = time.perf_counter()
    order = torch.randperm(len(train_x))
    for begin in range(0, len(order), args.batch_size):
        index = order[begin:begin + args.batch_size]
        optimizer.zero_grad(set_to_none=True)
        loss = loss_fn(model(train_x[index]), train_y[index])
        loss.backward()
        optimizer.step()
    seconds = time.perf_counter() - start

    model.eval()
    correct = 0
    with torch.no_grad():
        for begin in range(0, len(test_x), 1000):
            logits = model(test_x[begin:begin + 1000])
            correct += (logits.argmax(1) == test_y[begin:begin + 1000]).sum().item()
    print(json.dumps({"framework": "pytorch", "epoch_seconds": seconds,
                      "test_accuracy": correct / len(test_x), "threads": args.threads}))


if __name__ == "__main__":
    main()
