#!/usr/bin/env python3
"""Writes PyTorch's own OpInfo sample inputs, with PyTorch's answers, for
tests/conformance/opinfo_test.cpp.

    opinfo_samples.py OUT_FILE MAX_SAMPLES_PER_VARIANT DTYPES [OP ...]

For every named op (default: all of OPS below) and each of DTYPES
(comma-separated torch names, e.g. float32,int64) that the op supports, every sample of
torch.testing._internal.common_methods_invocations.op_db (evenly thinned to at
most MAX_SAMPLES_PER_VARIANT) is run through PyTorch. OUT_FILE is one
safetensors file: the tensors of every sample ("t0", "t1", ...) and, in its
metadata "samples", a JSON list with one entry per sample:

    {"op", "variant", "dtype", "input", "args", "kwargs",
     "outputs": [tensor names] | "error": message,
     "cotangents": [name or null per output],
     "grads": [[argument tensor name, its gradient's name or null], ...]}

Arguments are encoded as: a tensor {"t": name, "grad": bool}, a float
{"f": repr}, a list {"list": [...]}, a string {"s": text}, a dtype
{"dtype": name}; ints, bools and None as themselves. Gradients are those of
sum_k sum(out_k * cotangent_k) over the floating outputs, for every floating
tensor argument that requires grad (null: PyTorch's None, i.e. zeros).
"""
import json
import os
import sys
import types

import torch

# op_db imports expecttest, a test-only package Debian does not ship; the
# samples never use it.
if "expecttest" not in sys.modules:
    try:
        import expecttest  # noqa: F401
    except ImportError:
        stub = types.ModuleType("expecttest")

        import unittest

        class _TestCase(unittest.TestCase):
            pass

        stub.TestCase = _TestCase
        stub.ACCEPT = False
        sys.modules["expecttest"] = stub

from torch.testing._internal.common_methods_invocations import op_db  # noqa: E402

# PyTorch names of the ops Tessera implements, as op_db spells them.
OPS = """
abs add addcdiv addcmul addmm all amax amin any arange argmax argmin argsort atan2
baddbmm bmm bucketize cat ceil clamp clamp_max clamp_min clone cos count_nonzero
cross cumprod cumsum diag diagonal div einsum eq erf erfc erfinv exp exp2
expm1 eye flip floor floor_divide fmod frac gather ge gt hypot index_add
index_fill index_put index_select isfinite isinf isnan le lerp linalg.vector_norm
linspace log log10 log1p log2 log_softmax logaddexp logaddexp2 logical_and
logical_not logical_or logical_xor lt masked_fill masked_select matmul max
maximum mean min minimum mm movedim mul nan_to_num narrow ne neg nonzero norm
outer permute pow prod reciprocal remainder repeat repeat_interleave reshape roll
round rsqrt scatter scatter_add scatter_reduce searchsorted sigmoid sign sin
softmax sort sqrt std std_mean sub sum t take_along_dim tanh tensordot tile topk
trace transpose tril triu trunc unbind var var_mean where
nn.functional.adaptive_avg_pool1d nn.functional.adaptive_avg_pool2d
nn.functional.adaptive_max_pool1d nn.functional.adaptive_max_pool2d
nn.functional.avg_pool1d nn.functional.avg_pool2d nn.functional.batch_norm
nn.functional.binary_cross_entropy nn.functional.binary_cross_entropy_with_logits
nn.functional.celu nn.functional.conv1d nn.functional.conv2d
nn.functional.conv_transpose2d nn.functional.cosine_similarity
nn.functional.cross_entropy nn.functional.elu nn.functional.embedding
nn.functional.embedding_bag nn.functional.gelu nn.functional.glu
nn.functional.group_norm nn.functional.hardsigmoid nn.functional.hardswish
nn.functional.hardtanh nn.functional.huber_loss nn.functional.instance_norm
nn.functional.interpolate nn.functional.kl_div nn.functional.l1_loss
nn.functional.layer_norm nn.functional.leaky_relu nn.functional.linear
nn.functional.logsigmoid nn.functional.max_pool1d nn.functional.max_pool2d
nn.functional.mish nn.functional.mse_loss nn.functional.nll_loss
nn.functional.normalize nn.functional.one_hot nn.functional.pad
nn.functional.pixel_shuffle nn.functional.pixel_unshuffle nn.functional.prelu
nn.functional.relu nn.functional.relu6 nn.functional.selu nn.functional.silu
nn.functional.smooth_l1_loss nn.functional.softplus nn.functional.softsign
nn.functional.unfold
""".split()

# One safetensors writer and one result flattener for every PyTorch-side
# test script.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "io"))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from torch_safetensors import NAMES as SAVED, save_file  # noqa: E402
from torch_check import as_list as flatten  # noqa: E402


class Unsupported(Exception):
    pass


class Writer:
    def __init__(self):
        self.tensors = {}

    def add(self, tensor):
        if tensor.dtype not in SAVED:
            raise Unsupported(f"dtype {tensor.dtype}")
        name = f"t{len(self.tensors)}"
        # A copy: samples share tensors that later samples update in place
        # (batch_norm's running statistics).
        self.tensors[name] = tensor.detach().clone().contiguous()
        return name

    def save(self, path, metadata):
        save_file(path, self.tensors, metadata)


def encode(value, writer, leaves):
    if isinstance(value, torch.Tensor):
        wants = value.requires_grad and value.dtype.is_floating_point
        for name, leaf in leaves:
            if leaf is value:  # the same tensor passed twice is one leaf
                return {"t": name, "grad": True}
        name = writer.add(value)
        if wants:
            leaves.append((name, value))
        return {"t": name, "grad": wants}
    if isinstance(value, bool) or value is None or isinstance(value, int):
        return value
    if isinstance(value, float):
        return {"f": repr(value)}
    if isinstance(value, str):
        return {"s": value}
    if isinstance(value, torch.dtype):
        if value not in SAVED:
            raise Unsupported(f"dtype argument {value}")
        return {"dtype": SAVED[value]}
    if isinstance(value, (list, tuple, torch.Size)):
        return {"list": [encode(item, writer, leaves) for item in value]}
    raise Unsupported(f"argument of type {type(value).__name__}")


def thin(samples, limit):
    """At most `limit` samples, evenly spaced, each with its position in the
    full list (a fewer-sample run is a subset of a fuller one)."""
    if len(samples) <= limit:
        return list(enumerate(samples))
    step = len(samples) / limit
    return [(int(i * step), samples[int(i * step)]) for i in range(limit)]


def record(op, dtype, sample, writer, generator):
    leaves = []
    entry = {"op": op.name, "variant": op.variant_test_name, "dtype": SAVED[dtype]}
    entry["input"] = encode(sample.input, writer, leaves)
    entry["args"] = [encode(arg, writer, leaves) for arg in sample.args]
    entry["kwargs"] = {key: encode(value, writer, leaves) for key, value in sample.kwargs.items()}
    try:
        outputs = flatten(op.op(sample.input, *sample.args, **sample.kwargs))
    except TypeError as error:
        if str(error).startswith("cannot compare"):  # a result as_list does not know
            raise Unsupported(str(error)) from error
        entry["error"] = " ".join(str(error).split())
        return entry
    except Exception as error:  # noqa: BLE001 (PyTorch's refusal is the answer)
        entry["error"] = " ".join(str(error).split())
        return entry
    entry["outputs"] = [writer.add(out) for out in outputs]
    cotangents, terms = [], []
    for out in outputs:
        if out.requires_grad and out.dtype.is_floating_point:
            weight = torch.randn(out.shape, generator=generator, dtype=out.dtype)
            cotangents.append(writer.add(weight))
            terms.append((out * weight).sum())
        else:
            cotangents.append(None)
    entry["cotangents"] = cotangents
    entry["grads"] = []
    if terms and leaves:
        try:
            grads = torch.autograd.grad(sum(terms), [leaf for _, leaf in leaves],
                                        allow_unused=True)
        except RuntimeError:  # PyTorch has no backward for this dtype (Half on CPU)
            grads = None
        for (name, _), grad in zip(leaves, grads or []):
            entry["grads"].append([name, None if grad is None else writer.add(grad)])
    if dtype in (torch.float32, torch.bfloat16, torch.float16):
        reference_in_float64(op, sample, entry, writer, leaves, cotangents)
    return entry


def reference_in_float64(op, sample, entry, writer, leaves, cotangents):
    """The same sample run in float64 ("outputs64", "grads64"): results may
    match this instead, where PyTorch's own rounding in the narrower dtype is
    the difference (a gradient that is zero in exact arithmetic, say)."""
    wide = {}

    def widen(value):
        if isinstance(value, torch.Tensor):
            if value.dtype not in (torch.float32, torch.bfloat16, torch.float16):
                return value
            if id(value) not in wide:
                wide[id(value)] = value.detach().double().requires_grad_(value.requires_grad)
            return wide[id(value)]
        if isinstance(value, (list, tuple)):
            return type(value)(widen(item) for item in value)
        return value

    try:
        outputs = flatten(op.op(widen(sample.input), *widen(tuple(sample.args)),
                                **{key: widen(value) for key, value in sample.kwargs.items()}))
    except Exception:  # noqa: BLE001 (no float64 reference for this sample)
        return
    if len(outputs) != len(entry["outputs"]):
        return
    entry["outputs64"] = [writer.add(out) for out in outputs]
    terms = [(out * writer.tensors[name].double()).sum()
             for out, name in zip(outputs, cotangents) if name is not None and out.requires_grad]
    wide_leaves = [wide.get(id(leaf)) for _, leaf in leaves]
    if not terms or not leaves or any(leaf is None for leaf in wide_leaves):
        return
    try:
        grads = torch.autograd.grad(sum(terms), wide_leaves, allow_unused=True)
    except Exception:  # noqa: BLE001
        return
    entry["grads64"] = [None if grad is None else writer.add(grad) for grad in grads]


def main():
    out_file, limit = sys.argv[1], int(sys.argv[2])
    dtypes = [getattr(torch, name) for name in sys.argv[3].split(",")]
    wanted = sys.argv[4:] or OPS
    by_name = {}
    for op in op_db:
        by_name.setdefault(op.name, []).append(op)
    writer, entries, skipped = Writer(), [], {}
    for name in wanted:
        if name not in by_name:
            raise SystemExit(f"op_db has no op named {name!r}")
        for op in by_name[name]:
            supported = op.supported_dtypes("cpu")
            for dtype in dtypes:
                if dtype not in supported:
                    continue
                torch.manual_seed(0)
                samples = thin(list(op.sample_inputs("cpu", dtype,
                                                     requires_grad=dtype.is_floating_point
                                                     and op.supports_autograd)), limit)
                for position, sample in samples:
                    # Cotangents that depend on the sample alone, not on
                    # which samples ran before it.
                    generator = torch.Generator().manual_seed(position)
                    try:
                        entries.append(record(op, dtype, sample, writer, generator))
                    except Unsupported as why:
                        skipped[str(why)] = skipped.get(str(why), 0) + 1
    writer.save(out_file, {"samples": json.dumps(entries), "skipped": json.dumps(skipped)})


if __name__ == "__main__":
    main()
