#!/usr/bin/python3
"""Writes tests/golden/plateau_golden.bin: PyTorch's ReduceLROnPlateau on fixed metric sequences.

Run with Debian's python and torch 1.13:  /usr/bin/python3 tests/golden/make_plateau_golden.py
The output is committed; test_plateau_golden.cpp feeds the same sequences to Kiln's
`[schedule] type = "plateau"` (core/train/lr_plateau.hpp) and compares the rate after every epoch.

How Kiln's keys map onto torch.optim.lr_scheduler.ReduceLROnPlateau:
    factor, cooldown, min_lr          the same
    min_delta                         threshold, with threshold_mode = "abs"
    patience p (reduce after p bad)   patience p - 1 (PyTorch reduces after patience + 1 bad epochs)
    mode min / max                    the same
    (eps = 0: Kiln reduces whenever the rate is above min_lr)

Every number is rounded to f32 before PyTorch sees it, so both sides decide on the same values.
File format: make_mlp_golden.py's (KILNGLD1). Per case N:
    caseN.options (7): base lr, factor, patience (Kiln's), cooldown, min_lr, min_delta, mode (0 min, 1 max)
    caseN.metric  (E): the watched metric after each epoch (nan and inf included)
    caseN.lr      (E): the rate after that epoch's update, i.e. the rate the next epoch trains at
"""
import math
import pathlib
import random
import struct

import torch

MAGIC = b"KILNGLD1"
VERSION = 1


def f32(x):
    return struct.unpack("<f", struct.pack("<f", x))[0]


def cases():
    nan, inf = float("nan"), float("inf")
    # A loss that falls, stalls inside min_delta, gets a nan, falls again and stalls for good.
    yield dict(lr=0.1, factor=0.5, patience=2, cooldown=0, min_lr=0.0, min_delta=0.01, mode="min",
               metric=[1.0, 0.8, 0.795, 0.79, 0.7, nan, 0.69, 0.6, 0.6, 0.6, 0.6, 0.6, 0.55, 0.55, 0.55])
    # An accuracy, patience 1 with cooldown 2, down to min_lr (0.1 -> 0.01 -> 0.0015 floor).
    yield dict(lr=0.1, factor=0.1, patience=1, cooldown=2, min_lr=0.0015, min_delta=0.0, mode="max",
               metric=[0.5, 0.6, 0.6, 0.55, 0.7, 0.7, 0.7, 0.7, 0.71, 0.7, 0.7, 0.7, 0.7, 0.7])
    # Equal values are not improvements (min_delta 0); an improvement inside the cooldown; inf first.
    yield dict(lr=0.05, factor=0.3, patience=3, cooldown=1, min_lr=0.0, min_delta=0.0, mode="min",
               metric=[inf, 2.0, 2.0, 2.0, 2.0, 1.0, 1.0, 1.0, 1.0, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5])
    # A long random walk.
    rng = random.Random(1301)
    walk, v = [], 1.0
    for _ in range(60):
        v += rng.uniform(-0.05, 0.04)
        walk.append(v)
    yield dict(lr=0.2, factor=0.3, patience=2, cooldown=1, min_lr=1e-4, min_delta=0.001, mode="min", metric=walk)


def torch_rates(c):
    param = torch.nn.Parameter(torch.zeros(1))
    opt = torch.optim.SGD([param], lr=f32(c["lr"]))
    sched = torch.optim.lr_scheduler.ReduceLROnPlateau(
        opt, mode=c["mode"], factor=f32(c["factor"]), patience=c["patience"] - 1, threshold=f32(c["min_delta"]),
        threshold_mode="abs", cooldown=c["cooldown"], min_lr=f32(c["min_lr"]), eps=0.0)
    rates = []
    for m in c["metric"]:
        sched.step(f32(m))
        rates.append(opt.param_groups[0]["lr"])
    return rates


def array(name, values):
    encoded = name.encode("ascii")
    out = struct.pack("<I", len(encoded)) + encoded
    out += struct.pack("<I", 1) + struct.pack("<q", len(values))
    return out + struct.pack("<%df" % len(values), *values)


def main():
    arrays = []
    for n, c in enumerate(cases()):
        options = [c["lr"], c["factor"], c["patience"], c["cooldown"], c["min_lr"], c["min_delta"],
                   0.0 if c["mode"] == "min" else 1.0]
        rates = torch_rates(c)
        arrays += [array(f"case{n}.options", options), array(f"case{n}.metric", c["metric"]),
                   array(f"case{n}.lr", rates)]
        print(f"case{n}: {len(rates)} epochs, {len(set(rates)) - 1} reductions, last rate {rates[-1]:.6g}")
    out = bytearray(MAGIC + struct.pack("<II", VERSION, len(arrays)))
    for a in arrays:
        out += a
    path = pathlib.Path(__file__).with_name("plateau_golden.bin")
    path.write_bytes(bytes(out))
    print(f"wrote {path} ({len(out)} bytes, {len(arrays)} arrays)")


if __name__ == "__main__":
    main()
