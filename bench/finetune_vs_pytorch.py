#!/usr/bin/env python3
"""Benchmark: ResNet-50 fine-tuning images/s with frozen layers, Kiln vs PyTorch, same machine.

Fine-tuning freezes most of a pretrained network and trains the rest. PyTorch's autograd then
computes no gradient for a frozen parameter and stops back-propagating below the lowest trainable
layer; Kiln's models do the same through ModelBuildContext::frozen ([model] freeze). This measures
three settings of torchvision's ResNet-50 (batch 8, 224x224, fp32, SGD with momentum; batch-norm
in training mode on both sides, as PyTorch without .eval()):
  full    nothing frozen (the resnet50_vs_pytorch.py step);
  layer4  conv1, bn1, layer1-3 frozen: layer4 and fc train;
  probe   everything but fc frozen (a linear probe).
and, with --frozen-bn eval, the same settings with the frozen layers' batch norms kept: Kiln's
[model] frozen_bn = "eval", PyTorch's .eval() on each batch norm whose weight and bias are frozen
(its own table in docs/benchmarks.md).
Kiln runs samples/resnet50-synthetic.toml with [model] freeze; PyTorch the same patterns through
requires_grad_(False), its optimizer over the trainable parameters, in the faster memory format
(channels_last and contiguous tried in the first round). Rounds alternate the sides, and each
ratio comes from one round. With --write the table replaces this CPU family's in docs/benchmarks.md.
    python3 bench/finetune_vs_pytorch.py --threads 2 --steps 10 [--rounds 3] [--write]
"""
import argparse
import datetime
import json
import statistics
import sys

import peers
import resnet50_vs_pytorch as resnet

SETTINGS = {
    "full": [],
    "layer4": ["conv1.*", "bn1.*", "layer1.*", "layer2.*", "layer3.*"],
    "probe": ["conv1.*", "bn1.*", "layer*"],
}


def kiln_sets(patterns, frozen_bn):
    sets = [f"model.freeze={json.dumps(patterns)}"] if patterns else []
    if patterns and frozen_bn == "eval":
        sets.append('model.frozen_bn="eval"')
    return sets


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--settings", default="full,layer4,probe", help=f"comma-separated, of {', '.join(SETTINGS)}")
    ap.add_argument("--torch-layouts", default="channels_last,contiguous")
    ap.add_argument("--frozen-bn", choices=["train", "eval"], default="train",
                    help="how the frozen layers' batch norms run: with batch statistics (train, as PyTorch "
                         "without .eval()) or with their kept running statistics (eval)")
    ap.add_argument("--write", action="store_true")
    args = ap.parse_args()
    if args.frozen_bn == "eval" and args.settings == "full,layer4,probe":
        args.settings = "layer4,probe"  # nothing is frozen in full: the same run as without the flag
    torch_info = peers.torch_info()
    layouts = args.torch_layouts.split(",")
    rows, detail = [], None
    for setting in args.settings.split(","):
        patterns = SETTINGS[setting]
        rounds = []
        for _ in range(args.rounds):
            k = resnet.run_kiln(args.threads, args.steps, "fp32", kiln_sets(patterns, args.frozen_bn))
            t = resnet.run_torch(args.threads, args.steps, "fp32", layouts, patterns, args.frozen_bn)
            layouts = [t["layout"]]  # later rounds and settings run only the faster format
            detail = detail or k["detail"]
            rounds.append((k, t))
            print(f"{setting}: Kiln {k['images_per_s']:.2f} img/s, PyTorch {t['images_per_s']:.2f} ({t['layout']})",
                  file=sys.stderr)
        ratios = [k["images_per_s"] / t["images_per_s"] for k, t in rounds]
        kiln_rate = statistics.median(k["images_per_s"] for k, _ in rounds)
        torch_rate = statistics.median(t["images_per_s"] for _, t in rounds)
        spread = f" ({min(ratios):.2f}-{max(ratios):.2f})" if len(ratios) > 1 else ""
        rows.append(f"| {setting} | {', '.join(patterns) or '-'} | {kiln_rate:.2f} | {torch_rate:.2f} "
                    f"({rounds[0][1]['layout']}) | **{statistics.median(ratios):.2f}x**{spread} "
                    f"| {max(k['peak_rss_mb'] for k, _ in rounds):.0f} | {max(t['peak_rss_mb'] for _, t in rounds):.0f} |")
    head = ["| setting | frozen | Kiln img/s | PyTorch img/s | Kiln/PyTorch | Kiln peak RSS (MB) "
            "| PyTorch peak RSS (MB) |", "|---|---|---|---|---|---|---|"]
    machine = peers.machine_line(detail, torch_info)
    print(machine)
    print("\n".join(head + rows))
    if args.write:
        bn_eval = args.frozen_bn == "eval"
        bn_text = ("; the frozen layers' batch norms keep their running statistics (Kiln's frozen_bn = \"eval\", "
                   "PyTorch's .eval())") if bn_eval else ""
        body = (f"Measured {datetime.date.today()}: fp32, {args.threads} threads, batch 8, 224x224, {args.steps} "
                f"timed steps after warm-up, medians of {args.rounds} paired rounds (ratio range in brackets){bn_text}; "
                f"PyTorch {torch_info['torch']} from PyPI.\n{machine}\n\n" + "\n".join(head + rows))
        key = "finetune-bench-bn-eval" if bn_eval else "finetune-bench"
        title = "Fine-tuning ResNet-50 with frozen batch norms kept" if bn_eval else "Fine-tuning ResNet-50"
        doc = peers.write_section(f"{key}:{peers.family_key()}", f"{title} on {peers.family_title()}", body,
                                  "Fine-tuning ResNet-50 with frozen layers")
        print(f"wrote {doc}", file=sys.stderr)


if __name__ == "__main__":
    main()
