#!/usr/bin/env python3
"""PyTorch side of tests/torch_check.h: evaluates one expression per request.

Reads requests from stdin, one per line:

    CASE_FILE <TAB> RESULT_FILE <TAB> EXPRESSION

CASE_FILE is a safetensors file holding the inputs "i0", "i1", ... (named
a, b, ... in the expression) and, for the gradient, weights "w0", "w1", ...
per output; its metadata "grad" lists which inputs take part in the
gradient ("1,0,..."). For each request it writes one line to stdout:

    ok <TAB> N_OUTPUTS <TAB> GRAD_NOTE     outputs "o<k>" and gradients
                                           "g<i>" are in RESULT_FILE
    error <TAB> MESSAGE                    the expression raised
    internal <TAB> MESSAGE                 the request itself is broken (a
                                           typo in the expression, a bad file)

GRAD_NOTE is "-" when gradients were written, or why not.
"""
import json
import math
import struct
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, __file__.rsplit("/", 1)[0] + "/io")
from torch_safetensors import DTYPES, save_file  # noqa: E402

NAMES = "abcdefghijklmnopqrstuvwxyz"


def load(path):
    with open(path, "rb") as f:
        data = f.read()
    (length,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + length])
    body = data[8 + length:]
    metadata = header.pop("__metadata__", {}) or {}
    tensors = {}
    for name, entry in header.items():
        begin, end = entry["data_offsets"]
        dtype = DTYPES[entry["dtype"]]
        raw = bytearray(body[begin:end])
        if dtype == torch.bfloat16:
            tensor = torch.frombuffer(raw, dtype=torch.int16).view(torch.bfloat16) if raw else \
                torch.empty(0, dtype=dtype)
        elif raw:
            tensor = torch.frombuffer(raw, dtype=dtype)
        else:
            tensor = torch.empty(0, dtype=dtype)
        tensors[name] = tensor.reshape(entry["shape"]).clone()
    return tensors, metadata


def as_list(result):
    if isinstance(result, torch.Tensor):
        return [result]
    if isinstance(result, (tuple, list)):
        out = []
        for item in result:
            out.extend(as_list(item))
        return out
    if isinstance(result, bool):
        return [torch.tensor(result)]
    if isinstance(result, int):
        return [torch.tensor(result, dtype=torch.int64)]
    if isinstance(result, float):
        return [torch.tensor(result, dtype=torch.float64)]
    raise TypeError(f"cannot compare a {type(result).__name__}")


def run(case_file, result_file, expression):
    tensors, metadata = load(case_file)
    flags = [flag == "1" for flag in metadata.get("grad", "").split(",") if flag]
    inputs = []
    for i in range(len(flags)):
        tensor = tensors[f"i{i}"]
        if flags[i]:
            tensor.requires_grad_(True)
        inputs.append(tensor)
    scope = {"torch": torch, "F": F, "math": math, "inf": math.inf, "nan": math.nan}
    scope.update({NAMES[i]: tensor for i, tensor in enumerate(inputs)})
    try:
        outputs = as_list(eval(expression, scope))  # noqa: S307 (test expressions)
    except (SyntaxError, NameError, AttributeError) as error:
        # A mistake in the test's expression, not an answer of PyTorch.
        return "internal\t" + type(error).__name__ + ": " + " ".join(str(error).split())
    except Exception as error:  # noqa: BLE001 (any PyTorch error is an answer)
        return "error\t" + " ".join(str(error).split())
    written = {f"o{k}": out.detach().contiguous() for k, out in enumerate(outputs)}
    note = "-"
    wanted = [tensor for tensor, flag in zip(inputs, flags) if flag]
    terms = []
    for k, out in enumerate(outputs):
        weight = tensors.get(f"w{k}")
        if weight is None or not out.requires_grad:
            continue
        if tuple(weight.shape) != tuple(out.shape):
            note = "output shapes differ"
            terms = []
            break
        terms.append((out * weight.to(out.dtype)).sum())
    if wanted and terms:
        try:
            grads = torch.autograd.grad(sum(terms), wanted, allow_unused=True)
            position = 0
            for i, flag in enumerate(flags):
                if not flag:
                    continue
                grad = grads[position]
                position += 1
                written[f"g{i}"] = (torch.zeros_like(inputs[i]) if grad is None
                                    else grad.detach().contiguous())
        except Exception as error:  # noqa: BLE001
            note = "PyTorch's backward raised: " + " ".join(str(error).split())
    elif wanted and note == "-":
        note = "no output depends differentiably on the inputs"
    save_file(result_file, written)
    return f"ok\t{len(outputs)}\t{note}"


def main():
    for line in sys.stdin:
        line = line.rstrip("\n")
        if not line:
            continue
        case_file, result_file, expression = line.split("\t", 2)
        try:
            answer = run(case_file, result_file, expression.replace("\\n", "\n"))
        except Exception as error:  # noqa: BLE001 (report, keep serving)
            answer = "internal\t" + " ".join(str(error).split())
        sys.stdout.write(answer + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
