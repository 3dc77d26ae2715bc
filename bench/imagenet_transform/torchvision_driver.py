#!/usr/bin/env python3
"""torchvision side of the benchmark: RandomResizedCrop(224), RandomHorizontalFlip, ToTensor,
Normalize on PIL images, one process, one thread; prints {"images": n, "seconds": wall,
"cpu_seconds": process CPU time}.

Usage: /usr/bin/python3 torchvision_driver.py <dataset root> <images>
The first pass over the files is a warm-up and is not timed (same rule as kiln_driver).
"""
import json
import sys
import time
from pathlib import Path

import torch
from PIL import Image
from torchvision import transforms

torch.set_num_threads(1)
root, images = Path(sys.argv[1]), int(sys.argv[2])
files = sorted((root / "train").glob("*/*.JPEG"))
pipeline = transforms.Compose([
    transforms.RandomResizedCrop(224),
    transforms.RandomHorizontalFlip(),
    transforms.ToTensor(),
    transforms.Normalize(mean=[0.485, 0.456, 0.406], std=[0.229, 0.224, 0.225]),
])


def load(path):
    with open(path, "rb") as f:
        return pipeline(Image.open(f).convert("RGB"))


for path in files:
    load(path)
start, cpu = time.perf_counter(), time.process_time()
for i in range(images):
    load(files[i % len(files)])
print(json.dumps({"images": images, "seconds": time.perf_counter() - start,
                  "cpu_seconds": time.process_time() - cpu}))
