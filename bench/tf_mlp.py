#!/usr/bin/env python3
"""The TensorFlow peer of Kiln's main job: the same MLP (784 -> 128 ReLU -> dropout 0.2 -> 10),
data, batch, optimizer (Adam 1e-3) and thread count as bench/pytorch_mlp.py.

Data are read from the same IDX files into memory once (pixels / 255); each epoch indexes a fresh
permutation with one compiled (tf.function) train step per batch, the last partial batch dropped
as Kiln does. Prints one JSON line per epoch: {"epoch", "train_s", "samples_per_s",
"test_accuracy"}. Run with the bench venv's interpreter (scripts/setup.sh --bench).
"""
import argparse
import gzip
import json
import os
import struct
import time
from pathlib import Path

import numpy as np

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import tensorflow as tf  # noqa: E402


def read_idx(path: Path) -> np.ndarray:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rb") as f:
        data = f.read()
    _, _, dtype, ndim = struct.unpack(">BBBB", data[:4])
    assert dtype == 0x08, f"{path}: not u8 IDX"
    dims = struct.unpack(">" + "I" * ndim, data[4 : 4 + 4 * ndim])
    return np.frombuffer(data[4 + 4 * ndim :], dtype=np.uint8).reshape(dims)


def load(root: Path, split: str):
    prefix = "train" if split == "train" else "t10k"
    x = read_idx(root / f"{prefix}-images-idx3-ubyte.gz").reshape(-1, 784).astype(np.float32) / 255.0
    y = read_idx(root / f"{prefix}-labels-idx1-ubyte.gz").astype(np.int32)
    return x, y


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--seed", type=int, default=42)
    args = ap.parse_args()

    tf.config.threading.set_intra_op_parallelism_threads(args.threads)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    tf.keras.utils.set_random_seed(args.seed)
    xtr, ytr = (tf.constant(a) for a in load(Path(args.data), "train"))
    xte, yte = load(Path(args.data), "test")
    model = tf.keras.Sequential([
        tf.keras.Input((784,)),
        tf.keras.layers.Dense(128, activation="relu"),
        tf.keras.layers.Dropout(0.2),
        tf.keras.layers.Dense(10),
    ])
    opt = tf.keras.optimizers.Adam(1e-3)
    loss_fn = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)

    @tf.function
    def step(idx):
        x, y = tf.gather(xtr, idx), tf.gather(ytr, idx)
        with tf.GradientTape() as tape:
            loss = loss_fn(y, model(x, training=True))
        opt.apply_gradients(zip(tape.gradient(loss, model.trainable_variables), model.trainable_variables))
        return loss

    steps = int(xtr.shape[0]) // args.batch
    rng = np.random.default_rng(args.seed)
    for epoch in range(args.epochs):
        perm = rng.permutation(int(xtr.shape[0])).astype(np.int32)
        t0 = time.perf_counter()
        for s in range(steps):
            step(perm[s * args.batch : (s + 1) * args.batch])
        train_s = time.perf_counter() - t0
        acc = float(np.mean(np.argmax(model(xte, training=False).numpy(), axis=1) == yte))
        print(json.dumps({"epoch": epoch + 1, "train_s": train_s,
                          "samples_per_s": steps * args.batch / train_s, "test_accuracy": acc}), flush=True)


if __name__ == "__main__":
    main()
