#!/usr/bin/env python3
"""PyTorch peer of Kiln's GPU ResNet-50 run: training images/s at the same batch, for a ratio.

torchvision's resnet50 on synthetic data already on the GPU (so no input pipeline is timed;
Kiln's figure includes its loader), SGD momentum, channels_last, and PyTorch's usual fast
settings per precision: fp32 with TF32 off (Kiln's cuda backend defaults to allow_tf32 = false),
tf32 (fp32 with TF32 allowed in cuDNN and cuBLAS, PyTorch's cuDNN default; compare with Kiln's
allow_tf32 = true), bf16 through torch.autocast, fp16 through torch.autocast with a GradScaler. cudnn.benchmark is
on. Time: CUDA events around `--steps` steps after `--warmup` steps. One JSON line per
precision on stdout: {"precision", "images_per_s", "max_memory_mib", "batch", "steps"}.
    python3 bench/gpu/pytorch_resnet50.py --batch 256 --steps 30 --precisions fp32 bf16 fp16
"""
import argparse
import json
import sys
import time

import torch
import torchvision


def run(precision: str, batch: int, warmup: int, steps: int, time_cap_s: float) -> dict:
    torch.manual_seed(0)
    torch.backends.cuda.matmul.allow_tf32 = precision == "tf32"
    torch.backends.cudnn.allow_tf32 = precision == "tf32"
    torch.backends.cudnn.benchmark = True
    device = torch.device("cuda")
    model = torchvision.models.resnet50().to(device, memory_format=torch.channels_last)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4)
    x = torch.randn(batch, 3, 224, 224, device=device).to(memory_format=torch.channels_last)
    y = torch.randint(0, 1000, (batch,), device=device)
    loss_fn = torch.nn.CrossEntropyLoss()
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(precision)
    scaler = torch.amp.GradScaler("cuda", enabled=precision == "fp16")

    def step():
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=dtype or torch.float32, enabled=dtype is not None):
            loss = loss_fn(model(x), y)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()

    torch.cuda.reset_peak_memory_stats()
    for _ in range(warmup):
        step()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    wall = time.monotonic()
    start.record()
    done = 0
    while done < steps and time.monotonic() - wall < time_cap_s:
        step()
        done += 1
    end.record()
    torch.cuda.synchronize()
    seconds = start.elapsed_time(end) / 1000.0
    result = {
        "precision": precision,
        "images_per_s": batch * done / seconds,
        "max_memory_mib": torch.cuda.max_memory_allocated() / 2**20,
        "batch": batch,
        "steps": done,
    }
    del model, opt, x, y
    torch.cuda.empty_cache()
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--warmup", type=int, default=8)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--time-cap", type=float, default=20.0, help="seconds of timed steps per precision at most")
    parser.add_argument("--precisions", nargs="+", default=["fp32", "bf16", "fp16"], choices=["fp32", "bf16", "fp16", "tf32"])
    args = parser.parse_args()
    if not torch.cuda.is_available():
        print("pytorch_resnet50: no CUDA device visible to PyTorch", file=sys.stderr)
        return 1
    print(f"# torch {torch.__version__}, torchvision {torchvision.__version__}, {torch.cuda.get_device_name(0)}",
          file=sys.stderr)
    for precision in args.precisions:
        print(json.dumps(run(precision, args.batch, args.warmup, args.steps, args.time_cap)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
