#!/usr/bin/python3
"""Writes tests/golden/mlp_golden.bin: a PyTorch reference for one training step of a tiny MLP.

Run with Debian's python and torch 1.13:  /usr/bin/python3 tests/golden/make_mlp_golden.py
The output is committed; test_mlp_golden.cpp compares Kiln's mlp plugin, SoftmaxCrossEntropy
and Adam against it. Regenerate only when the reference itself must change.

Network (Kiln's `mlp` with in_features 12, hidden [8], relu, dropout 0, num_classes 5):
    logits = head(relu(layers.0(x)))     x (6, 12), layers.0: 12 -> 8, head: 8 -> 5
    loss = mean over the batch of cross_entropy(logits, labels)   (no label smoothing)
then loss.backward() and one torch.optim.Adam step (lr 1e-2, betas (0.9, 0.999), eps 1e-8).

File format (little-endian, version 1):
    header:  8 bytes magic b"KILNGLD1", u32 version (= 1), u32 array count N
    N times: u32 name length L, L bytes name (ASCII, no terminator),
             u32 rank R, R x i64 dimensions, prod(dims) x f32 values (row-major)
Array names (PyTorch parameter names, as the mlp plugin names its parameters):
    input (6, 12), labels (6) (class indices stored as f32), logits (6, 5), loss (1) (mean),
    layers.0.weight (8, 12), layers.0.bias (8), head.weight (5, 8), head.bias (5)  -- initial,
    grad.<param name>   -- d(mean loss)/d(param),
    adam.<param name>   -- the parameter after one Adam step.
"""
import pathlib
import struct

import torch

MAGIC = b"KILNGLD1"
VERSION = 1
BATCH, IN, HIDDEN, CLASSES = 6, 12, 8, 5


def main():
    torch.manual_seed(20240611)
    layer0 = torch.nn.Linear(IN, HIDDEN)
    head = torch.nn.Linear(HIDDEN, CLASSES)
    params = {
        "layers.0.weight": layer0.weight,
        "layers.0.bias": layer0.bias,
        "head.weight": head.weight,
        "head.bias": head.bias,
    }
    x = torch.rand(BATCH, IN) * 2 - 1
    labels = torch.tensor([0, 4, 2, 2, 1, 3])
    initial = {name: p.detach().clone() for name, p in params.items()}

    logits = head(torch.relu(layer0(x)))
    loss = torch.nn.functional.cross_entropy(logits, labels)
    loss.backward()
    grads = {name: p.grad.detach().clone() for name, p in params.items()}

    opt = torch.optim.Adam(list(params.values()), lr=1e-2, betas=(0.9, 0.999), eps=1e-8)
    opt.step()

    arrays = [("input", x), ("labels", labels.to(torch.float32)), ("logits", logits.detach()),
              ("loss", loss.detach().reshape(1))]
    arrays += list(initial.items())
    arrays += [("grad." + n, g) for n, g in grads.items()]
    arrays += [("adam." + n, p.detach()) for n, p in params.items()]

    out = bytearray(MAGIC + struct.pack("<II", VERSION, len(arrays)))
    for name, t in arrays:
        t = t.detach().to(torch.float32).contiguous()
        encoded = name.encode("ascii")
        out += struct.pack("<I", len(encoded)) + encoded
        out += struct.pack("<I", t.dim()) + struct.pack("<%dq" % t.dim(), *t.shape)
        out += struct.pack("<%df" % t.numel(), *t.flatten().tolist())
    path = pathlib.Path(__file__).with_name("mlp_golden.bin")
    path.write_bytes(bytes(out))
    print(f"wrote {path} ({len(out)} bytes, {len(arrays)} arrays, loss {loss.item():.6f})")


if __name__ == "__main__":
    main()
