#!/usr/bin/env python3
"""torchvision side of the benchmark, one process, one thread, on the same files as kiln_driver:
RandomResizedCrop(224), RandomHorizontalFlip, then to a normalised float tensor, along one of
two paths:
  v2   torchvision.io.decode_jpeg on the file's bytes (libjpeg-turbo, uint8 CHW tensor), then
       transforms.v2 on the uint8 tensor (crop+resize, flip, ToDtype(float32, scale=True),
       Normalize): torchvision's fastest CPU path
  pil  PIL decode, then the classic transforms (RandomResizedCrop, flip, ToTensor, Normalize)
Prints {"images": n, "seconds": wall, "cpu_seconds": process CPU time, "path": ...}.

Usage: python torchvision_driver.py <dataset root> <images> [v2|pil]
The first pass over the files is a warm-up and is not timed (same rule as kiln_driver).
"""
import json
import sys
import time
from pathlib import Path

import torch

torch.set_num_threads(1)
root, images = Path(sys.argv[1]), int(sys.argv[2])
path = sys.argv[3] if len(sys.argv) > 3 else "v2"
files = sorted((root / "train").glob("*/*.JPEG"))
mean, std = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]

if path == "v2":
    from torchvision.io import decode_jpeg
    from torchvision.transforms import v2

    pipeline = v2.Compose([
        v2.RandomResizedCrop(224, antialias=True),
        v2.RandomHorizontalFlip(),
        v2.ToDtype(torch.float32, scale=True),
        v2.Normalize(mean=mean, std=std),
    ])

    def load(file):
        data = torch.frombuffer(bytearray(file.read_bytes()), dtype=torch.uint8)
        return pipeline(decode_jpeg(data))
elif path == "pil":
    from PIL import Image
    from torchvision import transforms

    pipeline = transforms.Compose([
        transforms.RandomResizedCrop(224),
        transforms.RandomHorizontalFlip(),
        transforms.ToTensor(),
        transforms.Normalize(mean=mean, std=std),
    ])

    def load(file):
        with open(file, "rb") as f:
            return pipeline(Image.open(f).convert("RGB"))
else:
    raise SystemExit(f"unknown path {path!r}: v2 or pil")

for file in files:
    load(file)
start, cpu = time.perf_counter(), time.process_time()
for i in range(images):
    load(files[i % len(files)])
print(json.dumps({"images": images, "seconds": time.perf_counter() - start,
                  "cpu_seconds": time.process_time() - cpu, "path": path}))
