#!/usr/bin/env python3
"""Benchmark: Kiln's MLP epoch vs PyTorch's and TensorFlow's, same machine, model, batch,
optimizer and threads.

Runs `kiln train` on samples/fashion-mnist-mlp.toml, bench/pytorch_mlp.py and bench/tf_mlp.py
one after the other in one invocation (the peers in the bench venv, bench/peers.py), takes the
median training-epoch time of each (epoch 1 excluded as warm-up when there are 3 or more),
prints them and the ratios under a line naming the CPU and each side's ISA, and with --write
replaces this CPU family's MLP table in docs/benchmarks.md. Usage (from the repo root, after
scripts/build.sh and scripts/setup.sh --bench):
    python3 bench/mlp_vs_pytorch.py --threads 1 --epochs 5 [--no-tf] [--write]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import datetime
from pathlib import Path

import peers

ROOT = peers.ROOT


def median_tail(values):
    return statistics.median(values[1:] if len(values) >= 3 else values)


def run_kiln(args):
    with tempfile.TemporaryDirectory() as tmp:
        run_dir = Path(tmp) / "run"
        cmd = [str(ROOT / "build/bin/kiln"), "train", "--config", str(ROOT / "samples/fashion-mnist-mlp.toml"),
               "--run-dir", str(run_dir), "--set", f"run.epochs={args.epochs}",
               "--set", f"backend.threads={args.threads}", "--set", "log.progress=never"]
        env = dict(os.environ, OMP_NUM_THREADS=str(args.threads))
        subprocess.run(cmd, check=True, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        rows = [json.loads(l) for l in (run_dir / "metrics.jsonl").read_text().splitlines()]
        detail = peers.kiln_device(run_dir)
    train = [r for r in rows if r["split"] == "train"]
    test = [r for r in rows if r["split"] == "test"]
    return [r["time_s"] for r in train], [r["samples_per_s"] for r in train], test[-1]["accuracy"], detail


def run_peer(script, args):
    cmd = [peers.peer_python(), str(ROOT / "bench" / script), "--epochs", str(args.epochs),
           "--threads", str(args.threads)]
    env = dict(os.environ, OMP_NUM_THREADS=str(args.threads))
    out = subprocess.run(cmd, check=True, env=env, capture_output=True, text=True).stdout
    rows = [json.loads(l) for l in out.splitlines() if l.startswith("{")]
    return [r["train_s"] for r in rows], [r["samples_per_s"] for r in rows], rows[-1]["test_accuracy"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--epochs", type=int, default=5)
    ap.add_argument("--no-tf", action="store_true", help="skip TensorFlow")
    ap.add_argument("--write", action="store_true", help="update docs/benchmarks.md")
    args = ap.parse_args()

    torch_info = peers.torch_info()
    k_time, k_sps, k_acc, detail = run_kiln(args)
    t_time, t_sps, t_acc = run_peer("pytorch_mlp.py", args)
    k, t = median_tail(k_time), median_tail(t_time)
    ks, ts = median_tail(k_sps), median_tail(t_sps)
    head = ("| threads | Kiln epoch (s) | PyTorch epoch (s) | Kiln samples/s | PyTorch samples/s | Kiln/PyTorch "
            f"| test acc Kiln / PyTorch after {args.epochs} epochs |")
    rule = "|---|---|---|---|---|---|---|"
    row = (f"| {args.threads} | {k:.3f} | {t:.3f} | {ks:,.0f} | {ts:,.0f} | **{ks / ts:.2f}x** | "
           f"{k_acc:.4f} / {t_acc:.4f} |")
    peers_text = f"PyTorch {torch_info['torch']}"
    if not args.no_tf:
        f_time, f_sps, f_acc = run_peer("tf_mlp.py", args)
        f, fs = median_tail(f_time), median_tail(f_sps)
        head += " TensorFlow epoch (s) | Kiln/TF | TF test acc |"
        rule += "---|---|---|"
        row += f" {f:.3f} | **{ks / fs:.2f}x** | {f_acc:.4f} |"
        peers_text += f", TensorFlow {peers.tf_version()}"
    machine = peers.machine_line(detail, torch_info)
    lines = [head, rule, row]
    print(machine)
    print("\n".join(lines))
    if args.write:
        family = peers.family_key()
        body = (f"Measured {datetime.date.today()}, peers from PyPI ({peers_text}), {args.epochs} epochs, "
                f"median epoch excluding the first.\n{machine}\n\n" + "\n".join(lines))
        doc = peers.write_section(f"mlp-bench:{family}:{args.threads}",
                                  f"MLP on {peers.family_title()}, {args.threads} thread(s) (PyPI peers)", body,
                                  "MLP on Fashion-MNIST")
        print(f"wrote {doc}", file=sys.stderr)


if __name__ == "__main__":
    main()
