#!/usr/bin/env python3
"""PyTorch's results for tests/ops/degenerate_shapes_test.cpp.

Reads one case per line from CASES: `family|shape|args`, shape and args as
comma-separated integers (either may be empty). The input is the f64 tensor
x with x.flatten()[i] = 2 * sin(i + 1) and the given shape. For each case it
writes one line to OUT:

  ok|shape|values|gradient   the result (shape, flattened values) and, for
                             a floating result, d sum(y * y) / dx (flattened;
                             "-" when y does not depend on x differentiably
                             or PyTorch's backward fails)
  error|message              PyTorch rejects the case

Usage: python3 tests/ops/torch_degenerate.py CASES OUT
"""
import math
import sys

import torch


def reduce_dims(args):
    keepdim = bool(args[0])
    return args[1:], keepdim


def reduction(fn, needs_dim=False):
    def run(x, args):
        dims, keepdim = reduce_dims(args)
        if not dims:
            if needs_dim or keepdim:
                return fn(x, dim=list(range(x.dim())), keepdim=keepdim)
            return fn(x)
        return fn(x, dim=dims, keepdim=keepdim)
    return run


def arg_reduction(fn):
    def run(x, args):
        keepdim = bool(args[0])
        if len(args) == 1:
            return fn(x, keepdim=keepdim) if keepdim else fn(x)
        return fn(x, dim=args[1], keepdim=keepdim)
    return run


def amax_all(fn):
    def run(x, args):
        dims, keepdim = reduce_dims(args)
        return fn(x, dim=dims, keepdim=keepdim)
    return run


FAMILIES = {
    "sum": reduction(torch.sum),
    "mean": reduction(torch.mean),
    "max": amax_all(torch.amax),
    "min": amax_all(torch.amin),
    "var": reduction(lambda x, **kw: torch.var(x, unbiased=True, **kw)),
    "std": reduction(lambda x, **kw: torch.std(x, unbiased=True, **kw)),
    "logsumexp": reduction(torch.logsumexp, needs_dim=True),
    "argmax": arg_reduction(torch.argmax),
    "argmin": arg_reduction(torch.argmin),
    "softmax": lambda x, a: torch.softmax(x, a[0]),
    "log_softmax": lambda x, a: torch.log_softmax(x, a[0]),
    "cumsum": lambda x, a: torch.cumsum(x, a[0]),
    "cumprod": lambda x, a: torch.cumprod(x, a[0]),
    "sort": lambda x, a: torch.sort(x, a[0], descending=True).values,
    "argsort": lambda x, a: torch.argsort(x, a[0]),
    "topk": lambda x, a: torch.topk(x, 0, a[0]).values,
    "bucketize": lambda x, a: torch.bucketize(x, torch.tensor([-1.0, 0.0, 1.0], dtype=x.dtype)),
    "cat": lambda x, a: torch.cat([x, x * 2], a[0]),
    "stack": lambda x, a: torch.stack([x, x * 2], a[0]),
    "squeeze": lambda x, a: x.squeeze(a[0]) if a else x.squeeze(),
    "unsqueeze": lambda x, a: x.unsqueeze(a[0]),
    "flatten": lambda x, a: x.flatten(a[0], a[1]),
    "transpose": lambda x, a: x.transpose(a[0], a[1]),
    "narrow": lambda x, a: x.narrow(a[0], a[1], a[2]),
    "select": lambda x, a: x.select(a[0], a[1]),
    "slice": lambda x, a: x[(slice(None),) * a[0] + (slice(a[1], a[2], a[3]),)],
    "index_select": lambda x, a: torch.index_select(x, a[0], torch.tensor([0])),
    "gather": lambda x, a: torch.gather(x, a[0], torch.zeros_like(x, dtype=torch.long)),
    "tril": lambda x, a: torch.tril(x, a[0]),
    "triu": lambda x, a: torch.triu(x, a[0]),
    "split": lambda x, a: torch.cat(torch.split(x, a[1], a[0]), a[0]),
    "chunk": lambda x, a: torch.cat(torch.chunk(x, a[1], a[0]), a[0]),
    "neg": lambda x, a: torch.neg(x),
    "abs": lambda x, a: torch.abs(x),
    "exp": lambda x, a: torch.exp(x),
    "tanh": lambda x, a: torch.tanh(x),
    "sigmoid": lambda x, a: torch.sigmoid(x),
    "relu": lambda x, a: torch.relu(x),
    "gelu": lambda x, a: torch.nn.functional.gelu(x),
    "silu": lambda x, a: torch.nn.functional.silu(x),
    "softplus": lambda x, a: torch.nn.functional.softplus(x),
    "square": lambda x, a: torch.square(x),
    "add": lambda x, a: x + x * 2,
    "mul": lambda x, a: x * x,
    "maximum": lambda x, a: torch.maximum(x, -x),
    "where": lambda x, a: torch.where(x > 0, x, -x),
    "clamp": lambda x, a: torch.clamp(x, -0.5, 0.5),
    "eq": lambda x, a: torch.eq(x, x),
    "matmul": lambda x, a: torch.matmul(x, x.transpose(-1, -2)),
    "layer_norm": lambda x, a: torch.nn.functional.layer_norm(x, x.shape[len(x.shape) - a[0]:]),
    "sin": lambda x, a: torch.sin(x),
    "cos": lambda x, a: torch.cos(x),
    "erf": lambda x, a: torch.erf(x),
    "math_unary": lambda x, a: torch.stack([
        torch.erfc(x), torch.erfinv(x * 0.4), torch.log1p(torch.abs(x)), torch.expm1(x),
        torch.log2(torch.abs(x) + 1), torch.log10(torch.abs(x) + 1), torch.exp2(x),
        torch.reciprocal(torch.abs(x) + 1), torch.floor(x), torch.ceil(x), torch.trunc(x),
        torch.round(x), torch.round(x, decimals=1), torch.frac(x), torch.sign(x),
        torch.nan_to_num(x)]),
    "math_predicates": lambda x, a: torch.stack([
        torch.isnan(x), torch.isinf(x), torch.isfinite(x), torch.logical_xor(x > 0, x < 1)]),
    "math_binary": lambda x, a: torch.stack([
        torch.remainder(x, 0.7), torch.fmod(x, -0.7), torch.atan2(x, x + 0.5),
        torch.hypot(x, x * 0.5 + 1), torch.logaddexp(x, -x), torch.logaddexp2(x, x * 0.5),
        torch.lerp(x, -x, 0.3), torch.addcmul(x, x, x, value=0.5),
        torch.addcdiv(x, x, torch.abs(x) + 1, value=2), torch.div(x, 0.7, rounding_mode="floor"),
        torch.div(x, 0.7, rounding_mode="trunc"), torch.clamp(x, x * 0 - 0.5, x * 0 + 0.5),
        torch.clamp_min(x, 0.2), torch.masked_fill(x, x > 0, torch.tensor(1.5, dtype=x.dtype))]),
    "sqrt": lambda x, a: torch.sqrt(torch.abs(x) + 1),
    "rsqrt": lambda x, a: torch.rsqrt(torch.abs(x) + 1),
    "log": lambda x, a: torch.log(torch.abs(x) + 1),
    "pow": lambda x, a: torch.pow(x, 3),
    "div": lambda x, a: x / (torch.abs(x) + 1),
    "sub": lambda x, a: x - x * 2,
    "minimum": lambda x, a: torch.minimum(x, -x),
    "logical": lambda x, a: torch.logical_or(torch.logical_and(x > 0, x < 1),
                                             torch.logical_not(x > -1)),
    "compare": lambda x, a: torch.stack([x < 0.5, x <= 0.5, x > 0.5, x >= 0.5, x != 0.5]),
    "cast": lambda x, a: x.float().double(),
    "dropout": lambda x, a: torch.nn.functional.dropout(x, 0.0, True),
    "pad": lambda x, a: torch.nn.functional.pad(x, (a[0], a[1])),
    "index_add": lambda x, a: x.index_add(a[0], torch.tensor([0]), index_source(x, a[0])),
    "scatter_add": lambda x, a: x.scatter_add(a[0], torch.zeros_like(x, dtype=torch.long), x),
    "scatter": lambda x, a: x.scatter(a[0], torch.zeros_like(x, dtype=torch.long), x),
    "scatter_reduce": lambda x, a: x.scatter_reduce(a[0], torch.zeros_like(x, dtype=torch.long), x,
                                                    "mean", include_self=False),
    "in_place": lambda x, a: torch.zeros_like(x).copy_(x + torch.zeros_like(x).fill_(2.0)),
    "embedding": lambda x, a: torch.nn.functional.embedding(torch.tensor([0, 0]), x),
    "cross_entropy": lambda x, a: torch.nn.functional.cross_entropy(
        x, torch.zeros(x.shape[:1] if x.dim() == 2 else (), dtype=torch.long)),
    "max_pool2d": lambda x, a: torch.nn.functional.max_pool2d(x, 1),
    "avg_pool2d": lambda x, a: torch.nn.functional.avg_pool2d(x, 1),
    "conv2d": lambda x, a: torch.nn.functional.conv2d(
        x, torch.ones(1, x.shape[-3] if x.dim() >= 3 else 1, 1, 1, dtype=torch.float64)),
    "batch_norm": lambda x, a: torch.nn.functional.batch_norm(x, None, None, training=True),
    "batch_norm_eval": lambda x, a: torch.nn.functional.batch_norm(
        x, *batch_norm_stats(x), weight=batch_norm_param(x), bias=batch_norm_param(x)),
}


def batch_norm_channels(x):
    return x.shape[1] if x.dim() >= 2 else 1


def batch_norm_stats(x):
    channels = batch_norm_channels(x)
    return (torch.zeros(channels, dtype=torch.float64), torch.ones(channels, dtype=torch.float64))


def batch_norm_param(x):
    return torch.full((batch_norm_channels(x),), 2.0, dtype=torch.float64)


def index_source(x, dim):
    """Ones shaped like x with size 1 along `dim` (x's shape if `dim` is invalid)."""
    shape = list(x.shape)
    if -len(shape) <= dim < len(shape):
        shape[dim] = 1
    return torch.ones(shape, dtype=x.dtype)


def numbers(values):
    return ",".join(repr(float(v)) for v in values)


def run_case(line):
    family, shape_text, args_text = line.split("|")
    shape = [int(s) for s in shape_text.split(",") if s]
    args = [int(s) for s in args_text.split(",") if s]
    count = math.prod(shape)
    x = torch.tensor([2 * math.sin(i + 1) for i in range(count)], dtype=torch.float64)
    x = x.reshape(shape).requires_grad_()
    try:
        y = FAMILIES[family](x, args)
    except (RuntimeError, IndexError, ValueError, TypeError) as error:
        return "error|" + str(error).splitlines()[0].replace("|", "/")
    gradient = "-"
    if y.dtype.is_floating_point and y.requires_grad:
        try:
            (grad,) = torch.autograd.grad((y * y).sum(), x, allow_unused=True)
            gradient = numbers(grad.flatten().tolist()) if grad is not None else "-"
        except RuntimeError:
            pass  # PyTorch 1.13's own backward fails on a few size-1 cases (var over [1])
    shape_out = ",".join(str(s) for s in y.shape)
    return "ok|%s|%s|%s" % (shape_out, numbers(y.detach().flatten().tolist()), gradient)


def main():
    with open(sys.argv[1]) as cases, open(sys.argv[2], "w") as out:
        for line in cases:
            line = line.strip()
            if line:
                out.write(run_case(line) + "\n")


if __name__ == "__main__":
    main()
