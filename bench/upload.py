#!/usr/bin/env python3
"""How fast a memory-mapped index goes up to the GPU: cuda.upload_from_file with 1-16 threads, against the
copy through the mapping it replaced and the card's copy bandwidth from page-locked memory.

    python3 bench/upload.py PREFIX.idx.npz        # on the GPU machine, the index in the page cache

Prints GB/s for each; the positions array (4 bytes a genome base) is the one timed.
"""
import sys
import time

import numpy as np

from gpualign import cuda_driver as driver
from gpualign.backends import cuda
from gpualign.index import load_index


def timed(label, nbytes, action, repeats=3):
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        action()
        best = min(best, time.perf_counter() - start)
    print(f"{label:48s} {nbytes / best / 1e9:6.1f} GB/s ({best:.3f} s)", flush=True)


def main(path):
    driver.init()
    positions = load_index(path).positions
    n = positions.nbytes
    print(f"positions: {n / 1e9:.2f} GB, memory-mapped: {isinstance(positions, np.memmap)}")
    np.asarray(positions[::1 << 20]).sum()   # nothing: the page cache holds the file after the build
    pinned = driver.pinned_array(1 << 30)
    pinned[:] = 1
    dev = driver.device_array(1 << 30)
    timed("page-locked -> GPU, 1 GiB (the copy bandwidth)", 1 << 30, lambda: dev.copy_to_device(pinned))
    del dev, pinned
    timed("through the mapping (to_device of the memmap)", n, lambda: driver.to_device(positions), repeats=2)
    for threads in (1, 2, 4, 8, 16):
        cuda.UPLOAD_THREADS = threads
        timed(f"upload_from_file, {threads} threads, {cuda.UPLOAD_CHUNK >> 20} MiB chunks", n,
              lambda: cuda.upload_from_file(positions), repeats=2)


if __name__ == "__main__":
    main(sys.argv[1])
