#!/usr/bin/env python3
"""Synthetic ImageNet-like JPEGs in the ImageFolder layout the `imagenet` source reads
(root/train/nXXX/*.JPEG, root/val/nXXX/*.JPEG).

Each image is 300-640 px per side, quality 90, smooth shapes plus noise, so it compresses to
about ImageNet's bytes per pixel and decodes at a realistic cost; random pixels would be far
larger and slower to decode, flat ones far faster. Each class has its own colour cast (a 30% blend
towards one hue per class), so a model can learn the labels: a training run whose accuracy stays
at chance has lost them somewhere in the pipeline. Used by bench/imagenet_transform/run.py (the
transform benchmark, one core) and scripts/gpu-check.sh's `imagenet` stage (the GPU sample's JPEG
pipeline on a lent machine, where processes make thousands quickly). Needs numpy and Pillow.

    python3 bench/jpeg_dataset.py --root DIR --train 4096 --val 512 [--classes 10] [--workers 16]
"""
import argparse
import colorsys
import os
import sys
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw, ImageFilter


def class_colour(label, classes):
    """The RGB colour class `label` of `classes` is cast towards: hues evenly spaced."""
    return np.array(colorsys.hsv_to_rgb(label / classes, 0.8, 0.9), dtype=np.float32) * 255


def make_image(rng, colour):
    """One ImageNet-like RGB image as a PIL Image, its size drawn from rng, cast towards colour."""
    w, h = int(rng.integers(300, 641)), int(rng.integers(300, 641))
    base = Image.fromarray(rng.integers(0, 256, (h // 16 + 2, w // 16 + 2, 3), dtype=np.uint8))
    img = base.resize((w, h), Image.BICUBIC)
    draw = ImageDraw.Draw(img)
    for _ in range(12):
        x0, y0 = int(rng.integers(0, w)), int(rng.integers(0, h))
        x1, y1 = x0 + int(rng.integers(20, 200)), y0 + int(rng.integers(20, 200))
        draw.ellipse([x0, y0, x1, y1], fill=tuple(int(v) for v in rng.integers(0, 256, 3)))
    img = img.filter(ImageFilter.GaussianBlur(1.0))
    noise = rng.normal(0, 10, (h, w, 3))
    pixels = 0.7 * np.asarray(img, dtype=np.float32) + 0.3 * colour + noise
    return Image.fromarray(np.clip(pixels, 0, 255).astype(np.uint8))


def write_images(split_dir, first, count, classes, seed):
    """Images first..first+count-1 of one split, class i % classes; returns (bytes, pixels)."""
    rng = np.random.default_rng([seed, first])
    total_bytes = total_pixels = 0
    for i in range(first, first + count):
        path = Path(split_dir) / f"n{i % classes:03d}" / f"img_{i:05d}.JPEG"
        path.parent.mkdir(parents=True, exist_ok=True)
        img = make_image(rng, class_colour(i % classes, classes))
        img.save(path, quality=90)
        total_bytes += path.stat().st_size
        total_pixels += img.width * img.height
    return total_bytes, total_pixels


def write_split(split_dir, count, classes=10, seed=0, workers=1):
    """count images into split_dir in `workers` processes; returns mean bytes per pixel."""
    workers = max(1, min(workers, count))
    chunk = -(-count // workers)
    jobs = [(split_dir, first, min(chunk, count - first), classes, seed) for first in range(0, count, chunk)]
    if workers == 1:
        results = [write_images(*job) for job in jobs]
    else:
        with ProcessPoolExecutor(workers) as pool:
            results = list(pool.map(write_images, *zip(*jobs)))
    total_bytes = sum(b for b, _ in results)
    total_pixels = sum(p for _, p in results)
    return total_bytes / total_pixels if total_pixels else 0.0


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--root", type=Path, required=True)
    parser.add_argument("--train", type=int, default=4096, help="images in root/train")
    parser.add_argument("--val", type=int, default=0, help="images in root/val (0: no val split)")
    parser.add_argument("--classes", type=int, default=10)
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    if args.train < 1 or args.val < 0 or args.classes < 1:
        sys.exit("jpeg_dataset: --train must be >= 1, --val >= 0 and --classes >= 1")
    bpp = write_split(args.root / "train", args.train, args.classes, args.seed, args.workers)
    line = f"jpeg_dataset: {args.train} train JPEGs ({bpp:.2f} bytes/pixel)"
    if args.val:
        write_split(args.root / "val", args.val, args.classes, args.seed + 1, args.workers)
        line += f", {args.val} val"
    print(f"{line}, {args.classes} classes, in {args.root}")


if __name__ == "__main__":
    main()
