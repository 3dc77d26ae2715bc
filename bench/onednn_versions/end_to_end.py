"""Whole training runs of two Kiln builds side by side: the same sources built against two oneDNN
versions (Debian's 2.6 in build/, a 3.x one configured with -DKILN_ONEDNN_ROOT=..., see
docs/building.md, "Another oneDNN"). Where conv_bench.cpp times oneDNN's convolutions alone, this
times what users run: ResNet-50 training (synthetic data, batch 8) in fp32 and bf16 and the MLP on
Fashion-MNIST, the two builds taking turns within each round so that a shared machine's load hits
both alike. Prints a markdown table of medians and new/old.

usage: bench/onednn_versions/end_to_end.py --old build --new build-onednn3 [--rounds 3] [--steps 10]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))
import peers  # noqa: E402


def train(build, config, threads, sets):
    """One `kiln train` of `build`: its last train epoch's samples/s and epoch time, and the banner."""
    with tempfile.TemporaryDirectory() as tmp:
        run_dir = Path(tmp) / "run"
        cmd = [str(ROOT / build / "bin/kiln"), "train", "--config", str(ROOT / "samples" / config),
               "--run-dir", str(run_dir), "--set", f"backend.threads={threads}", "--set", "log.progress=never",
               "--set", "checkpoint.every_epochs=0"]
        for kv in sets:
            cmd += ["--set", kv]
        done = subprocess.run(cmd, env=dict(os.environ, OMP_NUM_THREADS=str(threads)),
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        if done.returncode != 0:
            sys.exit(f"end_to_end: `kiln train` of {build} on {config} failed (status {done.returncode}):\n"
                     f"{done.stderr.strip()}")
        rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
        detail = peers.kiln_device(run_dir)
    last = [r for r in rows if r["split"] == "train"][-1]
    return last["samples_per_s"], last["time_s"], detail


def workloads(steps, threads):
    resnet = ["run.epochs=2", f"data.train.count={8 * steps}"]
    return {
        f"ResNet-50 fp32, batch 8, {threads} threads (img/s)":
            ("resnet50-synthetic.toml", threads, resnet + ["precision.type=fp32"], 0),
        f"ResNet-50 bf16, batch 8, {threads} threads (img/s)":
            ("resnet50-synthetic.toml", threads, resnet + ["precision.type=bf16", "precision.allow_emulated=true"], 0),
        "MLP on Fashion-MNIST, 1 thread (s per epoch)":
            ("fashion-mnist-mlp.toml", 1, ["run.epochs=2"], 1),
    }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--old", default="build", help="build directory of the reference (default: build)")
    ap.add_argument("--new", required=True, help="build directory against the other oneDNN")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--steps", type=int, default=10, help="ResNet-50 steps per epoch (2 epochs, the second timed)")
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    for build in (args.old, args.new):
        if not (ROOT / build / "bin/kiln").is_file():
            sys.exit(f"end_to_end: no {ROOT / build / 'bin/kiln'}: build that tree first (docs/building.md, "
                     f"\"Another oneDNN\")")

    results, details = {}, {}
    for r in range(args.rounds):
        for name, (config, threads, sets, field) in workloads(args.steps, args.threads).items():
            order = (args.old, args.new) if r % 2 == 0 else (args.new, args.old)
            for build in order:
                out = train(build, config, threads, sets)
                results.setdefault((name, build), []).append(out[field])
                details.setdefault(build, out[2])
                print(f"round {r + 1} {name} {build}: {out[field]:.3f}", file=sys.stderr, flush=True)

    for build in (args.old, args.new):
        print(f"- `{build}`: {details[build]}")
    print(f"\nCPU: {peers.cpu_model()} ({peers.cpu_family_model()}); {args.rounds} rounds, builds alternating; "
          f"medians (ranges in brackets)\n")
    print(f"| work | `{args.old}` | `{args.new}` | new / old |")
    print("|---|---|---|---|")
    for name in workloads(args.steps, args.threads):
        old, new = results[(name, args.old)], results[(name, args.new)]
        m_old, m_new = statistics.median(old), statistics.median(new)
        print(f"| {name} | {m_old:.3f} ({min(old):.3f}-{max(old):.3f}) | {m_new:.3f} ({min(new):.3f}-{max(new):.3f}) "
              f"| {m_new / m_old:.3f} |")


if __name__ == "__main__":
    main()
