"""PyTorch's gloo all-reduce, timed as `kiln bench-comm` times its in-place column: float sum,
each collective complete before the next, a barrier before each timed loop, time averaged over
iterations. One process per rank (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT from the caller);
rank 0 prints one "size_bytes time_us" line per size.

usage: pytorch_gloo.py SIZE_BYTES... [--iters N] [--warmup N]
"""
import argparse
import os
import time

import torch
import torch.distributed as dist


def main():
    p = argparse.ArgumentParser()
    p.add_argument("sizes", type=int, nargs="+")
    p.add_argument("--iters", type=int, default=20)
    p.add_argument("--warmup", type=int, default=5)
    a = p.parse_args()
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    for size in a.sizes:
        t = torch.ones(max(1, size // 4))
        for _ in range(a.warmup):
            dist.all_reduce(t)
        dist.barrier()
        start = time.perf_counter()
        for _ in range(a.iters):
            dist.all_reduce(t)
        us = (time.perf_counter() - start) / a.iters * 1e6
        if rank == 0:
            print(size, f"{us:.1f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
