#!/usr/bin/env python3
"""Benchmark: ResNet-50 training images/s, Kiln vs PyTorch, same machine, threads and batch.

Kiln runs samples/resnet50-synthetic.toml (batch 8, 224x224, SGD momentum) for `--steps` steps
after one warm-up epoch of the same length; PyTorch runs torchvision's resnet50 with its fastest
CPU settings: channels_last for fp32, and torch.autocast("cpu", dtype=torch.bfloat16) with
channels_last for bf16. Each side runs in its own process, one after the other, in one
invocation; peak resident memory is that process's ru_maxrss. With --write the table replaces
the ResNet section of docs/benchmarks.md.
    /usr/bin/python3 bench/resnet50_vs_pytorch.py --threads 2 --steps 10 [--write]
"""
import argparse
import datetime
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

TORCH_CHILD = r"""
import json, sys, time, resource, torch, torchvision
threads, steps, precision = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
torch.set_num_threads(threads)
torch.manual_seed(0)
model = torchvision.models.resnet50().to(memory_format=torch.channels_last)
opt = torch.optim.SGD(model.parameters(), lr=0.003125, momentum=0.9, weight_decay=1e-4)
x = torch.randn(8, 3, 224, 224).to(memory_format=torch.channels_last)
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


def run_kiln(threads, steps, precision):
    with tempfile.TemporaryDirectory() as tmp:
        run_dir = Path(tmp) / "run"
        cmd = [str(ROOT / "build/bin/kiln"), "train", "--config", str(ROOT / "samples/resnet50-synthetic.toml"),
               "--run-dir", str(run_dir), "--set", "run.epochs=2", "--set", f"data.train.count={8 * steps}",
               "--set", f"backend.threads={threads}", "--set", f"precision.type={precision}",
               "--set", "log.progress=never", "--set", "checkpoint.every_epochs=0"]
        env = dict(os.environ, OMP_NUM_THREADS=str(threads))
        # GNU time reports this run's own peak RSS (the OS's children figure is a running max).
        rss_file = Path(tmp) / "rss_kb"
        subprocess.run(["/usr/bin/time", "-f", "%M", "-o", str(rss_file)] + cmd, check=True, env=env,
                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        rss_kb = int(rss_file.read_text().split()[-1])
        rows = [json.loads(l) for l in (run_dir / "metrics.jsonl").read_text().splitlines()]
    train = [r for r in rows if r["split"] == "train"]
    return {"images_per_s": train[-1]["samples_per_s"], "peak_rss_mb": rss_kb / 1024}


def run_torch(threads, steps, precision):
    env = dict(os.environ, OMP_NUM_THREADS=str(threads))
    out = subprocess.run(["/usr/bin/python3", "-c", TORCH_CHILD, str(threads), str(steps), precision],
                         check=True, env=env, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--write", action="store_true")
    args = ap.parse_args()
    rows = []
    for precision in ("fp32", "bf16"):
        k = run_kiln(args.threads, args.steps, precision)
        t = run_torch(args.threads, args.steps, precision)
        rows.append((precision, k, t))
    lines = ["| precision | Kiln img/s | PyTorch img/s (channels_last{}) | ratio | Kiln peak RSS (MB) | PyTorch peak RSS (MB) |",
             "|---|---|---|---|---|---|"]
    lines[0] = lines[0].format(", autocast for bf16")
    for precision, k, t in rows:
        lines.append(f"| {precision} | {k['images_per_s']:.2f} | {t['images_per_s']:.2f} | "
                     f"**{k['images_per_s'] / t['images_per_s']:.2f}x** | {k['peak_rss_mb']:.0f} | {t['peak_rss_mb']:.0f} |")
    print("\n".join(lines))
    if args.write:
        import torch
        start, end = "<!-- resnet-bench -->", "<!-- /resnet-bench -->"
        section = (f"{start}\nMeasured {datetime.date.today()}: {args.threads} threads, batch 8, 224x224, "
                   f"{args.steps} timed steps after warm-up, PyTorch {torch.__version__}.\n\n"
                   + "\n".join(lines) + f"\n{end}")
        doc = ROOT / "docs/benchmarks.md"
        text = doc.read_text()
        if start in text and end in text:
            text = text[: text.index(start)] + section + text[text.index(end) + len(end):]
        else:
            text = text.rstrip() + "\n\n## ResNet-50 training on the CPU: Kiln vs PyTorch\n\n" + section + "\n"
        doc.write_text(text)
        print(f"wrote {doc}", file=sys.stderr)


if __name__ == "__main__":
    main()
