#!/usr/bin/env python3
"""Benchmark: Kiln's MLP epoch vs PyTorch's, same machine, model, batch, optimizer and threads.

Runs `kiln train` on samples/fashion-mnist-mlp.toml and bench/pytorch_mlp.py one after the other
in one invocation, takes the median training-epoch time of each (epoch 1 excluded as warm-up
when there are 3 or more), prints both and the ratio, and with --write replaces the MLP section
of docs/benchmarks.md. Usage (from the repo root, after scripts/build.sh and
scripts/setup.sh --bench):
    /usr/bin/python3 bench/mlp_vs_pytorch.py --threads 1 --epochs 5 [--write]
"""
import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def median_tail(values):
    return statistics.median(values[1:] if len(values) >= 3 else values)


def cpu_name():
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor()


def run_kiln(args):
    with tempfile.TemporaryDirectory() as tmp:
        run_dir = Path(tmp) / "run"
        cmd = [str(ROOT / "build/bin/kiln"), "train", "--config", str(ROOT / "samples/fashion-mnist-mlp.toml"),
               "--run-dir", str(run_dir), "--set", f"run.epochs={args.epochs}",
               "--set", f"backend.threads={args.threads}", "--set", "log.progress=never"]
        env = dict(os.environ, OMP_NUM_THREADS=str(args.threads))
        subprocess.run(cmd, check=True, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        rows = [json.loads(l) for l in (run_dir / "metrics.jsonl").read_text().splitlines()]
    train = [r for r in rows if r["split"] == "train"]
    test = [r for r in rows if r["split"] == "test"]
    return [r["time_s"] for r in train], [r["samples_per_s"] for r in train], test[-1]["accuracy"]


def run_torch(args):
    cmd = ["/usr/bin/python3", str(ROOT / "bench/pytorch_mlp.py"), "--epochs", str(args.epochs),
           "--threads", str(args.threads)]
    env = dict(os.environ, OMP_NUM_THREADS=str(args.threads))
    out = subprocess.run(cmd, check=True, env=env, capture_output=True, text=True).stdout
    rows = [json.loads(l) for l in out.splitlines() if l.startswith("{")]
    return [r["train_s"] for r in rows], [r["samples_per_s"] for r in rows], rows[-1]["test_accuracy"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--epochs", type=int, default=5)
    ap.add_argument("--write", action="store_true", help="update docs/benchmarks.md")
    args = ap.parse_args()

    k_time, k_sps, k_acc = run_kiln(args)
    t_time, t_sps, t_acc = run_torch(args)
    k, t = median_tail(k_time), median_tail(t_time)
    ks, ts = median_tail(k_sps), median_tail(t_sps)
    lines = [
        f"| threads | Kiln epoch (s) | PyTorch epoch (s) | Kiln samples/s | PyTorch samples/s | ratio (Kiln/PyTorch samples/s) | test acc Kiln / PyTorch after {args.epochs} epochs |",
        "|---|---|---|---|---|---|---|",
        f"| {args.threads} | {k:.3f} | {t:.3f} | {ks:,.0f} | {ts:,.0f} | **{ks / ts:.2f}x** | {k_acc:.4f} / {t_acc:.4f} |",
    ]
    print("\n".join(lines))
    if args.write:
        import torch  # noqa: only for the version string
        header = (f"<!-- mlp-bench:{args.threads} -->\n"
                  f"Measured {datetime.date.today()} on {cpu_name()} ({os.cpu_count()} cores), PyTorch {torch.__version__}, "
                  f"{args.epochs} epochs, median epoch excluding the first.\n\n")
        section = header + "\n".join(lines) + f"\n<!-- /mlp-bench:{args.threads} -->"
        doc = ROOT / "docs/benchmarks.md"
        text = doc.read_text() if doc.exists() else "# Benchmarks\n"
        start, end = f"<!-- mlp-bench:{args.threads} -->", f"<!-- /mlp-bench:{args.threads} -->"
        if start in text and end in text:
            text = text[: text.index(start)] + section + text[text.index(end) + len(end):]
        else:
            text = text.rstrip() + "\n\n" + section + "\n"
        doc.write_text(text)
        print(f"wrote {doc}", file=sys.stderr)


if __name__ == "__main__":
    main()
