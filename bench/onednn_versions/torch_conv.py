"""ResNet-50's 53 convolutions at batch 8 through PyTorch (oneDNN inside), in the same table form
as conv_bench.cpp: forward, backward-data and backward-weights per direction, f32 and bf16,
channels_last, each direction computed alone with aten.convolution_backward's output mask (the
weight gradient without the input gradient, as autograd.grad w.r.t. the weight alone does).

    python bench/onednn_versions/torch_conv.py [--reps 5] [--threads 2] [--dtype both] [--clock wall|cpu]

Prints "total <dtype> <direction> <ms per step>" lines like conv_bench, so run.sh can put the
two side by side. Run it with a venv that has torch (the setup script's bench option).
"""
import argparse
import statistics
import time

import torch

# (name, count, C, H, K, R, stride, needs input gradient): the list in conv_bench.cpp.
SHAPES = [
    ("conv1 7x7 3->64 s2 @224", 1, 3, 224, 64, 7, 2, False),
    ("l1 1x1 64->64 @56", 1, 64, 56, 64, 1, 1, True),
    ("l1 1x1 256->64 @56", 2, 256, 56, 64, 1, 1, True),
    ("l1 3x3 64->64 @56", 3, 64, 56, 64, 3, 1, True),
    ("l1 1x1 64->256 @56 (+ds)", 4, 64, 56, 256, 1, 1, True),
    ("l2 1x1 256->128 @56", 1, 256, 56, 128, 1, 1, True),
    ("l2 3x3 128->128 s2 @56", 1, 128, 56, 128, 3, 2, True),
    ("l2 ds 1x1 256->512 s2 @56", 1, 256, 56, 512, 1, 2, True),
    ("l2 1x1 512->128 @28", 3, 512, 28, 128, 1, 1, True),
    ("l2 3x3 128->128 @28", 3, 128, 28, 128, 3, 1, True),
    ("l2 1x1 128->512 @28", 4, 128, 28, 512, 1, 1, True),
    ("l3 1x1 512->256 @28", 1, 512, 28, 256, 1, 1, True),
    ("l3 3x3 256->256 s2 @28", 1, 256, 28, 256, 3, 2, True),
    ("l3 ds 1x1 512->1024 s2 @28", 1, 512, 28, 1024, 1, 2, True),
    ("l3 1x1 1024->256 @14", 5, 1024, 14, 256, 1, 1, True),
    ("l3 3x3 256->256 @14", 5, 256, 14, 256, 3, 1, True),
    ("l3 1x1 256->1024 @14", 6, 256, 14, 1024, 1, 1, True),
    ("l4 1x1 1024->512 @14", 1, 1024, 14, 512, 1, 1, True),
    ("l4 3x3 512->512 s2 @14", 1, 512, 14, 512, 3, 2, True),
    ("l4 ds 1x1 1024->2048 s2 @14", 1, 1024, 14, 2048, 1, 2, True),
    ("l4 1x1 2048->512 @7", 2, 2048, 7, 512, 1, 1, True),
    ("l4 3x3 512->512 @7", 2, 512, 7, 512, 3, 1, True),
    ("l4 1x1 512->2048 @7", 3, 512, 7, 2048, 1, 1, True),
]
assert sum(s[1] for s in SHAPES) == 53


CLOCK = time.perf_counter  # --clock cpu: time.process_time (all threads' CPU time, as conv_bench)


def median_ms(fn, reps):
    fn()  # warm-up: oneDNN primitive creation
    times = []
    for _ in range(reps):
        t0 = CLOCK()
        fn()
        times.append((CLOCK() - t0) * 1e3)
    return statistics.median(times)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--dtype", choices=["f32", "bf16", "both"], default="both")
    ap.add_argument("--layers", action="store_true")
    ap.add_argument("--clock", choices=["wall", "cpu"], default="wall")
    args = ap.parse_args()
    global CLOCK
    if args.clock == "cpu":
        CLOCK = time.process_time
    torch.set_num_threads(args.threads)
    onednn = next((line.split("v", 1)[1].split()[0] for line in torch.__config__.show().splitlines()
                   if "MKL-DNN" in line and "v" in line), "?")
    print(f"torch {torch.__version__}, oneDNN {onednn}, "
          f"{torch.get_num_threads()} threads, {args.clock} clock")
    dtypes = {"f32": [torch.float32], "bf16": [torch.bfloat16], "both": [torch.float32, torch.bfloat16]}[args.dtype]
    cl = torch.channels_last
    conv_bwd = torch.ops.aten.convolution_backward
    gen = torch.Generator().manual_seed(1)
    for dtype in dtypes:
        name = "bf16" if dtype == torch.bfloat16 else "f32"
        tot = {"fwd": 0.0, "bwd_data": 0.0, "bwd_weights": 0.0}
        for label, count, c, h, k, r, stride, needs_dx in SHAPES:
            pad = r // 2
            p = (h + 2 * pad - r) // stride + 1
            x = torch.randn(args.batch, c, h, h, generator=gen).to(dtype).contiguous(memory_format=cl)
            w = torch.randn(k, c, r, r, generator=gen).to(dtype).contiguous(memory_format=cl)
            dy = torch.randn(args.batch, k, p, p, generator=gen).to(dtype).contiguous(memory_format=cl)
            common = ([stride, stride], [pad, pad], [1, 1], False, [0, 0], 1)
            with torch.no_grad():
                f = median_ms(lambda: torch.nn.functional.conv2d(x, w, None, stride, pad), args.reps)
                bd = median_ms(lambda: conv_bwd(dy, x, w, None, *common, [True, False, False]), args.reps) if needs_dx else 0.0
                bw = median_ms(lambda: conv_bwd(dy, x, w, None, *common, [False, True, False]), args.reps)
            tot["fwd"] += f * count
            tot["bwd_data"] += bd * count
            tot["bwd_weights"] += bw * count
            if args.layers:
                print(f"layer {name} {label:30s} x{count} fwd {f:8.3f} bwd_data {bd:8.3f} bwd_weights {bw:8.3f} ms")
        for direction, ms in tot.items():
            print(f"total {name} {direction} {ms:.2f}")


if __name__ == "__main__":
    main()
