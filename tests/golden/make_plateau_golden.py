#!/usr/bin/python3
"""Writes tests/golden/plateau_golden.bin: PyTorch's ReduceLROnPlateau on fixed metric sequences.

Run with Debian's python and torch 1.13:  /usr/bin/python3 tests/golden/make_plateau_golden.py
The output is committed; test_plateau_golden.cpp feeds the same sequences to Kiln's
`[schedule] type = "plateau"` (core/train/lr_plateau.hpp) and compares the rate after every epoch.

How Kiln's keys map onto torch.optim.lr_scheduler.ReduceLROnPlateau:
    factor, cooldown, min_lr          the same
    min_delta                         threshold
    min_delta_mode abs / rel          threshold_mode abs / rel
    patience p (reduce after p bad)   patience p - 1 (PyTorch reduces after patience + 1 bad epochs)
    mode min / max                    the same
    (eps = 0: Kiln reduces whenever the rate is above min_lr)

Every number is rounded to f32 before PyTorch sees it, so both sides decide on the same values.
File format: make_mlp_golden.py's (KILNGLD1). Per case N:
    caseN.options (8): base lr, factor, patience (Kiln's), cooldown, min_lr, min_delta, mode (0 min, 1 max),
                       min_delta_mode (0 abs, 1 rel)
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
    yield dict(lr=0.1, factor=0.5, patience=2, cooldown=0, min_lr=0.0, min_delta=0.01, mode="min", delta_mode="abs",
               metric=[1.0, 0.8, 0.795, 0.79, 0.7, nan, 0.69, 0.6, 0.6, 0.6, 0.6, 0.6, 0.55, 0.55, 0.55])
    # An accuracy, patience 1 with cooldown 2, down to min_lr (0.1 -> 0.01 -> 0.0015 floor).
    yield dict(lr=0.1, factor=0.1, patience=1, cooldown=2, min_lr=0.0015, min_delta=0.0, mode="max", delta_mode="abs",
               metric=[0.5, 0.6, 0.6, 0.55, 0.7, 0.7, 0.7, 0.7, 0.71, 0.7, 0.7, 0.7, 0.7, 0.7])
    # Equal values are not improvements (min_delta 0); an improvement inside the cooldown; inf first.
    yield dict(lr=0.05, factor=0.3, patience=3, cooldown=1, min_lr=0.0, min_delta=0.0, mode="min", delta_mode="abs",
               metric=[inf, 2.0, 2.0, 2.0, 2.0, 1.0, 1.0, 1.0, 1.0, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5])
    # A long random walk.
    rng = random.Random(1301)
    walk, v = [], 1.0
    for _ in range(60):
        v += rng.uniform(-0.05, 0.04)
        walk.append(v)
    yield dict(lr=0.2, factor=0.3, patience=2, cooldown=1, min_lr=1e-4, min_delta=0.001, mode="min", delta_mode="abs",
               metric=walk)
    # Relative margins (PyTorch's default threshold_mode): a falling loss whose steps shrink with
    # it, where 2% of the best and an absolute 0.02 decide differently (0.79 -> 0.785 -> 0.78 ...
    # is judged against 0.0158, not 0.02); inf first, a nan in the middle.
    yield dict(lr=0.1, factor=0.5, patience=2, cooldown=0, min_lr=0.0, min_delta=0.02, mode="min", delta_mode="rel",
               metric=[inf, 2.0, 1.5, 1.2, 1.0, 0.9, 0.885, 0.87, 0.85, nan, 0.84, 0.8, 0.79, 0.785, 0.78, 0.77])
    # An accuracy with a 1% relative margin and a cooldown: 0.80 -> 0.805 is 0.6% (bad), 0.81 is
    # 1.25% (an improvement), and an improvement inside the cooldown.
    yield dict(lr=0.2, factor=0.2, patience=2, cooldown=1, min_lr=0.001, min_delta=0.01, mode="max", delta_mode="rel",
               metric=[0.5, 0.7, 0.8, 0.805, 0.804, 0.81, 0.815, 0.816, 0.9, 0.905, 0.906, 0.907, 0.95, 0.951])
    # The random walk again, relative.
    yield dict(lr=0.2, factor=0.3, patience=2, cooldown=1, min_lr=1e-4, min_delta=0.005, mode="min", delta_mode="rel",
               metric=walk)


def torch_rates(c):
    param = torch.nn.Parameter(torch.zeros(1))
    opt = torch.optim.SGD([param], lr=f32(c["lr"]))
    sched = torch.optim.lr_scheduler.ReduceLROnPlateau(
        opt, mode=c["mode"], factor=f32(c["factor"]), patience=c["patience"] - 1, threshold=f32(c["min_delta"]),
        threshold_mode=c["delta_mode"], cooldown=c["cooldown"], min_lr=f32(c["min_lr"]), eps=0.0)
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
                   0.0 if c["mode"] == "min" else 1.0, 0.0 if c["delta_mode"] == "abs" else 1.0]
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
