#!/usr/bin/env python3
"""Writes the first N samples of an IDX (MNIST-format) image/label pair as CSV rows
"label,p0,...,p783" with raw pixel bytes, for the CSV data-plugin sample's test.
Usage: idx_to_csv.py <images.idx3-ubyte[.gz]> <labels.idx1-ubyte[.gz]> <N> <out.csv>"""
import gzip
import struct
import sys


def open_idx(path):
    return gzip.open(path, "rb") if path.endswith(".gz") else open(path, "rb")


def main():
    images_path, labels_path, count, out_path = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
    with open_idx(images_path) as images, open_idx(labels_path) as labels, open(out_path, "w") as out:
        magic, n, rows, cols = struct.unpack(">IIII", images.read(16))
        lmagic, ln = struct.unpack(">II", labels.read(8))
        if magic != 0x803 or lmagic != 0x801 or n != ln:
            sys.exit(f"{images_path}/{labels_path}: not a matching IDX image/label pair")
        pixels = rows * cols
        for _ in range(min(count, n)):
            label = labels.read(1)[0]
            image = images.read(pixels)
            out.write(str(label) + "," + ",".join(map(str, image)) + "\n")


if __name__ == "__main__":
    main()
