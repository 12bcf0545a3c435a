#!/usr/bin/env python3
"""Writes PyTorch reference results for Tessera's parity tests.

For each model (an MLP, the example CNN, one pre-norm transformer block) it
saves, in safetensors files under OUTDIR: PyTorch's initial weights
("model.<name>"), an input batch and targets, PyTorch's output, loss and the
gradient of every parameter ("grad.<name>"). For the MLP it also runs 50
steps of SGD with momentum and 50 of AdamW on saved batches and stores the
final parameters ("sgd.<name>", "adamw.<name>"); AdamW runs once more in f64
("adamw_f64.<name>"), the exact trajectory that f32 runs are measured against. tests/parity/parity_test.cpp
rebuilds the same models in Tessera from these weights and compares.

PyTorch from Debian (1.13) has no safetensors package, so the files are
written by tests/io/torch_safetensors.py, which packs the format by hand.

Usage: python3 tests/parity/torch_reference.py OUTDIR
"""
import os
import sys

import torch
import torch.nn as nn

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "io"))
from torch_safetensors import save_file as save_safetensors  # noqa: E402


def mlp():
    return nn.Sequential(nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 128), nn.ReLU(),
                         nn.Linear(128, 10))


def cnn():
    return nn.Sequential(
        nn.Conv2d(1, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(64 * 7 * 7, 128), nn.ReLU(), nn.Linear(128, 10))


class CausalBlock(nn.Module):
    """TransformerEncoderLayer (pre-norm, GELU, batch first) with a causal mask."""

    def __init__(self, d_model=64, heads=4, seq=16):
        super().__init__()
        self.layer = nn.TransformerEncoderLayer(d_model, heads, 4 * d_model, dropout=0.0,
                                                activation="gelu", batch_first=True,
                                                norm_first=True)
        self.mask = torch.triu(torch.full((seq, seq), float("-inf")), diagonal=1)

    def forward(self, x):
        return self.layer(x, src_mask=self.mask)


def forward_backward(name, model, x, y, loss_fn, outdir):
    tensors = {f"model.{k}": v.clone() for k, v in model.state_dict().items()}
    out = model(x)
    loss = loss_fn(out, y)
    loss.backward()
    tensors.update({"input": x, "target": y, "output": out, "loss": loss.reshape(())})
    for k, p in model.named_parameters():
        tensors[f"grad.{k}"] = p.grad
    save_safetensors(os.path.join(outdir, f"{name}.safetensors"), tensors)


def optimizer_runs(outdir, steps=50, batch=32):
    torch.manual_seed(1)
    inputs = torch.randn(steps, batch, 784)
    targets = torch.randint(0, 10, (steps, batch))
    start = mlp()
    tensors = {f"model.{k}": v.clone() for k, v in start.state_dict().items()}
    tensors.update({"inputs": inputs, "targets": targets})
    runs = {"sgd": lambda p: torch.optim.SGD(p, lr=0.05, momentum=0.9),
            "adamw": lambda p: torch.optim.AdamW(p, lr=1e-3, weight_decay=0.01)}
    runs["adamw_f64"] = runs["adamw"]
    for run, make_optimizer in runs.items():
        dtype = torch.float64 if run.endswith("_f64") else torch.float32
        model = mlp()
        model.load_state_dict(start.state_dict())
        model.to(dtype)
        optimizer = make_optimizer(model.parameters())
        for i in range(steps):
            optimizer.zero_grad()
            nn.functional.cross_entropy(model(inputs[i].to(dtype)), targets[i]).backward()
            optimizer.step()
        for k, v in model.state_dict().items():
            tensors[f"{run}.{k}"] = v.clone()
    save_safetensors(os.path.join(outdir, "optimizers.safetensors"), tensors)


def main():
    outdir = sys.argv[1]
    os.makedirs(outdir, exist_ok=True)
    torch.set_num_threads(1)
    torch.manual_seed(0)
    forward_backward("mlp", mlp(), torch.randn(32, 784), torch.randint(0, 10, (32,)),
                     nn.CrossEntropyLoss(), outdir)
    forward_backward("cnn", cnn(), torch.randn(8, 1, 28, 28), torch.randint(0, 10, (8,)),
                     nn.CrossEntropyLoss(), outdir)
    forward_backward("block", CausalBlock(), torch.randn(2, 16, 64), torch.randn(2, 16, 64),
                     nn.MSELoss(), outdir)
    optimizer_runs(outdir)


if __name__ == "__main__":
    main()
