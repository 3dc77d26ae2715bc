#!/usr/bin/env python3
"""The PyTorch peer of Kiln's main job: the same MLP, data, batch, optimizer and thread count.

Data are read from the same IDX files into memory once (pixels / 255), and each epoch indexes a
fresh permutation -- the fastest way to feed this model in PyTorch, with no DataLoader overhead.
Prints one JSON line per epoch: {"epoch", "train_s", "samples_per_s", "test_accuracy"}.
Run with Debian's interpreter (/usr/bin/python3), which has python3-torch.
"""
import argparse
import gzip
import json
import struct
import time
from pathlib import Path

import torch


def read_idx(path: Path) -> torch.Tensor:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rb") as f:
        data = f.read()
    _, _, dtype, ndim = struct.unpack(">BBBB", data[:4])
    assert dtype == 0x08, f"{path}: not u8 IDX"
    dims = struct.unpack(">" + "I" * ndim, data[4 : 4 + 4 * ndim])
    return torch.frombuffer(bytearray(data[4 + 4 * ndim :]), dtype=torch.uint8).reshape(dims)


def load(root: Path, split: str):
    prefix = "train" if split == "train" else "t10k"
    x = read_idx(root / f"{prefix}-images-idx3-ubyte.gz").reshape(-1, 784).float() / 255.0
    y = read_idx(root / f"{prefix}-labels-idx1-ubyte.gz").long()
    return x, y


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--seed", type=int, default=42)
    args = ap.parse_args()

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    xtr, ytr = load(Path(args.data), "train")
    xte, yte = load(Path(args.data), "test")
    model = torch.nn.Sequential(
        torch.nn.Linear(784, 128), torch.nn.ReLU(), torch.nn.Dropout(0.2), torch.nn.Linear(128, 10)
    )
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    loss_fn = torch.nn.CrossEntropyLoss()
    steps = xtr.shape[0] // args.batch  # drop the last partial batch, as Kiln's default does
    for epoch in range(args.epochs):
        model.train()
        perm = torch.randperm(xtr.shape[0])
        t0 = time.perf_counter()
        for s in range(steps):
            idx = perm[s * args.batch : (s + 1) * args.batch]
            opt.zero_grad(set_to_none=True)
            loss = loss_fn(model(xtr[idx]), ytr[idx])
            loss.backward()
            opt.step()
        train_s = time.perf_counter() - t0
        model.eval()
        with torch.no_grad():
            acc = (model(xte).argmax(1) == yte).float().mean().item()
        print(json.dumps({"epoch": epoch + 1, "train_s": train_s,
                          "samples_per_s": steps * args.batch / train_s, "test_accuracy": acc}), flush=True)


if __name__ == "__main__":
    main()
