#!/usr/bin/env python3
"""PyTorch side of Tessera's safetensors interoperability tests.

  torch_safetensors.py write FILE   writes known tensors the way PyTorch users
                                    do (Debian's PyTorch has no safetensors
                                    package, so the header is packed by hand)
  torch_safetensors.py check FILE   reads a file Tessera wrote, independently
                                    of Tessera's reader, and exits 1 unless
                                    every tensor has the expected values

tests/io/safetensors_test.cpp runs both and holds the same expected values.
"""
import json
import struct
import sys

import torch

NAMES = {torch.float32: "F32", torch.float64: "F64", torch.float16: "F16",
         torch.bfloat16: "BF16", torch.int64: "I64", torch.int32: "I32", torch.uint8: "U8",
         torch.bool: "BOOL"}
DTYPES = {name: dtype for dtype, name in NAMES.items()}


def expected():
    return {
        "f32": torch.arange(6, dtype=torch.float32).reshape(2, 3) / 4 - 0.5,
        "f64": torch.linspace(-1, 1, 5, dtype=torch.float64),
        "f16": torch.tensor([0.5, -1.25, 65504.0], dtype=torch.float16),
        "bf16": torch.tensor([1.0, -3.5, 0.0078125], dtype=torch.bfloat16),
        "i64": torch.tensor([-(2 ** 40), 0, 2 ** 62], dtype=torch.int64),
        "i32": torch.tensor([[-7], [2 ** 31 - 1]], dtype=torch.int32),
        "u8": torch.tensor([0, 128, 255], dtype=torch.uint8),
        "bool": torch.tensor([True, False, True]),
        "transposed": torch.arange(6, dtype=torch.float32).reshape(2, 3).t(),
        "scalar": torch.tensor(3.25),
        "empty": torch.zeros(0, 4),
    }


def to_bytes(tensor):
    tensor = tensor.contiguous()
    if tensor.dtype == torch.bfloat16:  # numpy has no bfloat16
        tensor = tensor.view(torch.int16)
    return tensor.numpy().tobytes()


def save_file(path, tensors, metadata=None):
    """Writes `tensors` (a dict of name -> tensor) the way
    safetensors.torch.save_file does; the parity tests use it too."""
    header, chunks, offset = {}, [], 0
    if metadata:
        header["__metadata__"] = metadata
    for name, tensor in tensors.items():
        data = to_bytes(tensor.detach().cpu())
        header[name] = {"dtype": NAMES[tensor.dtype], "shape": list(tensor.shape),
                        "data_offsets": [offset, offset + len(data)]}
        chunks.append(data)
        offset += len(data)
    encoded = json.dumps(header).encode()
    encoded += b" " * (-len(encoded) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(encoded)))
        f.write(encoded)
        for chunk in chunks:
            f.write(chunk)


def write(path):
    save_file(path, expected(), {"framework": "pt"})


def check(path):
    with open(path, "rb") as f:
        raw = f.read()
    (length,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + length])
    data = raw[8 + length:]
    metadata = header.pop("__metadata__", {})
    ok = metadata == {"framework": "tessera"}
    if not ok:
        print(f"unexpected metadata: {metadata}")
    for name, tensor in expected().items():
        entry = header.pop(name)
        begin, end = entry["data_offsets"]
        dtype = DTYPES[entry["dtype"]]
        chunk = bytearray(data[begin:end])
        loaded = (torch.frombuffer(chunk, dtype=dtype) if chunk else torch.empty(0, dtype=dtype))
        loaded = loaded.reshape(entry["shape"])
        if loaded.dtype != tensor.dtype or not torch.equal(loaded, tensor.contiguous()):
            print(f"mismatch in {name}: {loaded} vs {tensor}")
            ok = False
    if header:
        print(f"unexpected tensors: {list(header)}")
        ok = False
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    {"write": write, "check": check}[sys.argv[1]](sys.argv[2])
