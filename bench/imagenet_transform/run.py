#!/usr/bin/env python3
"""Benchmark: images/s per core of the ImageNet train transform, Kiln vs torchvision.

Generates ~200 JPEGs of ImageNet-like sizes (300-640 px per side, quality 90, smooth shapes plus
texture so they compress to ImageNet-like bits/pixel), builds kiln_driver.cpp against the build
tree, then times, in one invocation and pinned to one CPU:
  Kiln:        `imagenet` plugin read() (RandomResizedCrop 224, flip, normalise) on one thread,
               and the same through the whole loader: `kiln bench-data` with one worker
  torchvision: decode_jpeg + transforms.v2 on uint8 tensors (its fastest CPU path), and the
               classic PIL path (RandomResizedCrop, flip, ToTensor, Normalize), each one
               process with torch.set_num_threads(1), from the bench venv (bench/peers.py)
and prints the rates and Kiln's ratio to each (goal: Kiln >= 2x the fastest), under a line naming
the CPU. Rates are images per CPU-second of the timed loop (process CPU time), so other load on
the machine does not skew the ratio much. Usage, from the repo root after the build
(scripts/build.sh) and scripts/setup.sh --bench (numpy and PIL for the generator: the venv has
both, Debian's python3-numpy/python3-pil too):
    python3 bench/imagenet_transform/run.py [--build build] [--images 2000]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
sys.path.insert(0, str(ROOT / "bench"))
import jpeg_dataset  # noqa: E402
import peers  # noqa: E402


def build_driver(build, out):
    cmd = ["g++", "-O2", "-std=c++20", f"-I{ROOT / 'interfaces'}", f"-I{ROOT / 'core/include'}", f"-I{ROOT / 'sdk/include'}",
           str(HERE / "kiln_driver.cpp"), "-o", str(out), f"-L{build / 'lib'}",
           f"-Wl,-rpath,{build / 'lib'}", "-lkiln_core", "-lkiln_sdk"]
    subprocess.run(cmd, check=True)


def bench_data_rate(build, data_root, images, count, tmp):
    """(images per CPU-second, per wall-second) of `kiln bench-data`, one loader worker, batch 32
    (or the whole data set when it is smaller)."""
    batch = min(32, count)
    config = tmp / "bench-data.toml"
    config.write_text(f"""[backend]\ntype = "cpu"\nthreads = 1\n[model]\ntype = "resnet"\ndepth = 18\n
[data.train]\ntype = "imagenet"\nroot = "{data_root}"\n[loader]\nbatch = {batch}\nworkers = 1\nprefetch = 2\n""")
    done = subprocess.run([str(build / "bin/kiln"), "bench-data", "--config", str(config), "--json",
                           "-n", str(max(1, images // batch))], capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"kiln bench-data failed: {done.stderr.strip()}")
    result = json.loads(done.stdout)
    return result["samples_per_cpu_s"], result["samples_per_s"]


def rate(cmd):
    """(images per CPU-second, images per wall-second) of one driver run."""
    result = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)
    return result["images"] / result["cpu_seconds"], result["images"] / result["seconds"]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build", default=str(ROOT / "build"), help="build tree with lib/ and plugins")
    parser.add_argument("--images", type=int, default=2000, help="timed images per side")
    parser.add_argument("--count", type=int, default=200, help="generated JPEGs")
    parser.add_argument("--cpu", type=int, default=0, help="CPU to pin both sides to")
    args = parser.parse_args()
    build = Path(args.build).resolve()
    load = os.getloadavg()[0]
    os.sched_setaffinity(0, {args.cpu})  # children inherit the single-CPU mask
    env = dict(os.environ, OMP_NUM_THREADS="1")
    with tempfile.TemporaryDirectory(prefix="kiln-imagenet-bench-") as tmp:
        tmp = Path(tmp)
        bpp = jpeg_dataset.write_split(tmp / "data" / "train", args.count)  # 10 classes, seed 0, one process
        driver = tmp / "kiln_driver"
        build_driver(build, driver)
        kiln = rate([str(driver), str(build / "lib/kiln/plugins"), str(tmp / "data"), str(args.images)])
        loader = bench_data_rate(build, tmp / "data", args.images, args.count, tmp)
        peer = [peers.peer_python(), str(HERE / "torchvision_driver.py"), str(tmp / "data"), str(args.images)]
        v2 = rate(peer + ["v2"])
        pil = rate(peer + ["pil"])
    torch = peers.torch_info()
    print(f"CPU: {peers.cpu_model()}, pinned to CPU {args.cpu}; PyTorch {torch['torch']} (PyPI), "
          f"cpu capability {torch['torch_isa']}")
    print(f"data: {args.count} JPEGs, 300-640 px per side, quality 90, {bpp:.2f} bytes/pixel")
    print(f"load average before the run   : {load:.1f} ({os.cpu_count()} CPUs)")
    print("images per CPU-second (per core; wall-clock rate in brackets, lower when CPUs are shared)")
    print(f"kiln imagenet train transform : {kiln[0]:8.1f}   ({kiln[1]:.1f} wall)")
    print(f"kiln bench-data, 1 worker     : {loader[0]:8.1f}   ({loader[1]:.1f} wall; the whole loader)")
    print(f"torchvision decode_jpeg + v2  : {v2[0]:8.1f}   ({v2[1]:.1f} wall)")
    print(f"torchvision + PIL             : {pil[0]:8.1f}   ({pil[1]:.1f} wall)")
    print(f"ratio kiln / fastest torchvision: {kiln[0] / max(v2[0], pil[0]):6.2f}x (goal >= 2x); "
          f"kiln / PIL path {kiln[0] / pil[0]:.2f}x")


if __name__ == "__main__":
    main()
