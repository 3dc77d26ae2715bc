#!/usr/bin/env python3
"""Benchmark: ResNet-50 training images/s, Kiln vs PyTorch and TensorFlow, same machine, threads and batch.

Kiln runs samples/resnet50-synthetic.toml (batch 8, 224x224, SGD momentum) for `--steps` steps
after one warm-up epoch of the same length; PyTorch runs torchvision's resnet50 with its fastest
CPU settings: torch.autocast("cpu", dtype=torch.bfloat16) for bf16, and in both precisions the
faster of channels_last and contiguous (NCHW) memory format, each measured (channels_last wins
on AVX-512 CPUs, NCHW on the AVX2-only EPYC; --torch-layouts picks which to try); TensorFlow runs keras.applications.ResNet50 (channels_last, its native
layout) with a compiled train step, and the "mixed_bfloat16" policy for bf16. The peers come
from the bench venv (bench/peers.py: PyTorch 2.15 and TensorFlow 2.21 from PyPI, installed by
scripts/setup.sh --bench). Each side runs in its own process, one after the other, in one
invocation; peak resident memory is that process's own peak. The table starts with the CPU model
and each side's ISA; with --write it replaces this CPU family's table in docs/benchmarks.md, keeping
the earlier table's rows of the precisions not measured now (marked with that run's date).
The machines here are shared and a step's time swings by up to 20% between minutes, so each
precision runs `--rounds` paired rounds (default 3: Kiln, PyTorch, TensorFlow in turn) and the
table gives each side's median rate and the median of the per-round ratios with their range.
    python3 bench/resnet50_vs_pytorch.py --threads 2 --steps 10 [--rounds 3] [--no-tf] [--precisions fp32,bf16] [--write]
"""
import argparse
import datetime
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import peers

ROOT = peers.ROOT

TORCH_CHILD = r"""
import fnmatch, json, sys, time, resource, torch, torchvision
threads, steps, precision, layout = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
# Optional: comma-separated globs of parameter names to freeze (requires_grad_(False)), as Kiln's
# [model] freeze; the optimizer then holds only the trainable ones, as a fine-tuning script does.
freeze = [f for f in (sys.argv[5] if len(sys.argv) > 5 else "").split(",") if f]
# Optional: "eval" puts every batch-norm whose weight and bias are both frozen into eval mode, so
# it normalises with its running statistics and keeps them, as Kiln's [model] frozen_bn = "eval".
bn_eval = len(sys.argv) > 6 and sys.argv[6] == "eval"
torch.set_num_threads(threads)
torch.manual_seed(0)
fmt = torch.channels_last if layout == "channels_last" else torch.contiguous_format
model = torchvision.models.resnet50().to(memory_format=fmt)
for name, p in model.named_parameters():
    if any(fnmatch.fnmatchcase(name, f) for f in freeze):
        p.requires_grad_(False)
if bn_eval:
    for m in model.modules():
        if isinstance(m, torch.nn.BatchNorm2d) and not (m.weight.requires_grad or m.bias.requires_grad):
            m.eval()
opt = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=0.003125, momentum=0.9,
                      weight_decay=1e-4)
x = torch.randn(8, 3, 224, 224).to(memory_format=fmt)
y = torch.randint(0, 1000, (8,))
loss_fn = torch.nn.CrossEntropyLoss()
def step():
    opt.zero_grad(set_to_none=True)
    if precision == "bf16":
        with torch.autocast("cpu", dtype=torch.bfloat16):
            loss = loss_fn(model(x), y)
    else:
        loss = loss_fn(model(x), y)
    loss.backward()
    opt.step()
for _ in range(2):
    step()
t0 = time.perf_counter()
for _ in range(steps):
    step()
dt = time.perf_counter() - t0
print(json.dumps({"images_per_s": 8 * steps / dt,
                  "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""

TF_CHILD = r"""
import json, os, sys, time, resource
threads, steps, precision = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
import tensorflow as tf
tf.config.threading.set_intra_op_parallelism_threads(threads)
tf.config.threading.set_inter_op_parallelism_threads(1)
if precision == "bf16":
    tf.keras.mixed_precision.set_global_policy("mixed_bfloat16")
tf.keras.utils.set_random_seed(0)
model = tf.keras.applications.ResNet50(weights=None, input_shape=(224, 224, 3), classes=1000)
opt = tf.keras.optimizers.SGD(learning_rate=0.003125, momentum=0.9)
loss_fn = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=False)
x = tf.random.normal((8, 224, 224, 3))
y = tf.random.uniform((8,), 0, 1000, dtype=tf.int32)
@tf.function(jit_compile=False)
def step():
    with tf.GradientTape() as tape:
        loss = loss_fn(y, tf.cast(model(x, training=True), tf.float32))
    opt.apply_gradients(zip(tape.gradient(loss, model.trainable_variables), model.trainable_variables))
    return loss
for _ in range(2):
    step().numpy()
t0 = time.perf_counter()
for _ in range(steps):
    step().numpy()
dt = time.perf_counter() - t0
print(json.dumps({"images_per_s": 8 * steps / dt,
                  "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def run_kiln(threads, steps, precision, extra_sets=()):
    with tempfile.TemporaryDirectory() as tmp:
        run_dir = Path(tmp) / "run"
        cmd = [str(ROOT / "build/bin/kiln"), "train", "--config", str(ROOT / "samples/resnet50-synthetic.toml"),
               "--run-dir", str(run_dir), "--set", "run.epochs=2", "--set", f"data.train.count={8 * steps}",
               "--set", f"backend.threads={threads}", "--set", f"precision.type={precision}",
               "--set", "log.progress=never", "--set", "checkpoint.every_epochs=0"]
        for kv in extra_sets:
            cmd += ["--set", kv]
        if precision == "bf16":
            # Without native bf16 (AVX2-only CPUs) the cpu backend stores bf16 and computes in f32,
            # which the policy runs only when asked; the machine line then says so (the banner).
            cmd += ["--set", "precision.allow_emulated=true"]
        env = dict(os.environ, OMP_NUM_THREADS=str(threads))
        # GNU time reports this run's own peak RSS (the OS's children figure is a running max).
        rss_file = Path(tmp) / "rss_kb"
        subprocess.run(["/usr/bin/time", "-f", "%M", "-o", str(rss_file)] + cmd, check=True, env=env,
                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        rss_kb = int(rss_file.read_text().split()[-1])
        rows = [json.loads(l) for l in (run_dir / "metrics.jsonl").read_text().splitlines()]
        detail = peers.kiln_device(run_dir)
    train = [r for r in rows if r["split"] == "train"]
    return {"images_per_s": train[-1]["samples_per_s"], "peak_rss_mb": rss_kb / 1024, "detail": detail}


def run_peer(child, threads, steps, precision, *extra):
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), TF_CPP_MIN_LOG_LEVEL="2")
    out = subprocess.run([peers.peer_python(), "-c", child, str(threads), str(steps), precision, *extra],
                         check=True, env=env, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def run_torch(threads, steps, precision, layouts, freeze=(), frozen_bn="train"):
    """PyTorch in each memory format of `layouts`; the fastest run, with its format. channels_last
    wins where oneDNN has fast nhwc kernels (AVX-512), contiguous NCHW on the AVX2-only EPYC.
    `freeze`: globs of parameter names PyTorch trains without (requires_grad_(False));
    `frozen_bn`: "eval" puts the batch norms they freeze entirely into .eval()."""
    runs = []
    for layout in layouts:
        r = run_peer(TORCH_CHILD, threads, steps, precision, layout, ",".join(freeze), frozen_bn)
        r["layout"] = layout
        runs.append(r)
    return max(runs, key=lambda r: r["images_per_s"])


def measure_round(args, precision, layouts):
    """One paired round: Kiln, then PyTorch (each memory format of `layouts`), then TensorFlow."""
    k = run_kiln(args.threads, args.steps, precision)
    t = run_torch(args.threads, args.steps, precision, layouts)
    f = None if args.no_tf else run_peer(TF_CHILD, args.threads, args.steps, precision)
    return k, t, f


def median_row(rounds):
    """A precision's row from its rounds: the median rate of each side, the median of the per-round
    ratios (each ratio from one round, so the machine's load in that round hits both sides) with
    their range when there are several, and each side's highest peak RSS."""
    def med(side):
        return statistics.median(r[side]["images_per_s"] for r in rounds)

    def ratio(side):
        values = [r[0]["images_per_s"] / r[side]["images_per_s"] for r in rounds]
        text = f"**{statistics.median(values):.2f}x**"
        return text + (f" ({min(values):.2f}-{max(values):.2f})" if len(values) > 1 else "")

    def rss(side):
        return max(r[side]["peak_rss_mb"] for r in rounds)

    k, t, f = rounds[0]
    line = (f"| {med(0):.2f} | {med(1):.2f} ({t['layout']}) | {ratio(1)} | {rss(0):.0f} | {rss(1):.0f} |")
    if f:
        line += f" {med(2):.2f} | {ratio(2)} | {rss(2):.0f} |"
    return line


def kept_rows(old_body, measured, columns):
    """The rows of an earlier table (`old_body`, this script's section) for the precisions not
    measured now, so --write with --precisions fp32 does not drop the bf16 row: each marked with
    the earlier run's date and cut or padded ("-") to `columns` cells."""
    if not old_body:
        return []
    date = re.search(r"Measured (\d{4}-\d{2}-\d{2})", old_body)
    when = date.group(1) if date else "earlier"
    rows = []
    for line in old_body.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if not line.startswith("| ") or cells[0] in ("precision", "") or cells[0].split()[0] in measured:
            continue
        precision = cells[0].split()[0]
        if precision not in ("fp32", "bf16"):
            continue
        cells = (cells + ["-"] * columns)[:columns]
        cells[0] = f"{precision} (run of {when})" if "(run of" not in cells[0] else cells[0]
        rows.append("| " + " | ".join(cells) + " |")
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=3,
                    help="paired rounds per precision (Kiln, PyTorch, TF in turn); the table gives medians")
    ap.add_argument("--no-tf", action="store_true", help="skip TensorFlow")
    ap.add_argument("--precisions", default="fp32,bf16", help="comma-separated, of fp32 and bf16")
    ap.add_argument("--torch-layouts", default="channels_last,contiguous",
                    help="PyTorch memory formats to try in the first round (the fastest is reported and kept)")
    ap.add_argument("--write", action="store_true")
    args = ap.parse_args()
    if args.rounds < 1:
        ap.error("--rounds must be at least 1")
    torch_info = peers.torch_info()
    tf_version = None if args.no_tf else peers.tf_version()
    rows = []
    for precision in args.precisions.split(","):
        # The first round tries every PyTorch memory format; later rounds run only the fastest.
        rounds = [measure_round(args, precision, args.torch_layouts.split(","))]
        for _ in range(args.rounds - 1):
            rounds.append(measure_round(args, precision, [rounds[0][1]["layout"]]))
        rows.append((precision, rounds))
    head = ("| precision | Kiln img/s | PyTorch img/s (fastest memory format; autocast for bf16) | Kiln/PyTorch "
            "| Kiln peak RSS (MB) | PyTorch peak RSS (MB) |")
    rule = "|---|---|---|---|---|---|"
    if tf_version:
        head += " TensorFlow img/s (mixed_bfloat16 for bf16) | Kiln/TF | TF peak RSS (MB) |"
        rule += "---|---|---|"
    lines = [head, rule] + [f"| {precision} " + median_row(rounds) for precision, rounds in rows]
    machine = peers.machine_line(rows[0][1][0][0]["detail"], torch_info)
    peers_text = f"PyTorch {torch_info['torch']}" + (f", TensorFlow {tf_version}" if tf_version else "")
    rounds_text = (f"medians of {args.rounds} paired rounds (ratio range in brackets)" if args.rounds > 1
                   else "one round")
    print(machine)
    print("\n".join(lines))
    if args.write:
        family = peers.family_key()
        marker = f"resnet-bench:{family}"
        earlier = kept_rows(peers.read_section(marker), [p for p, _ in rows], rule.count("|") - 1)
        kept = (" Rows marked \"run of\" are kept from the table's earlier run (other precisions, other code)."
                if earlier else "")
        body = (f"Measured {datetime.date.today()}: {args.threads} threads, batch 8, 224x224, {args.steps} timed "
                f"steps after warm-up, {rounds_text}; peers from PyPI ({peers_text}).{kept}\n{machine}\n\n"
                + "\n".join(lines + earlier))
        doc = peers.write_section(marker, f"ResNet-50 on {peers.family_title()} (PyPI peers)", body,
                                  "ResNet-50 training on the CPU")
        print(f"wrote {doc}", file=sys.stderr)


if __name__ == "__main__":
    main()
