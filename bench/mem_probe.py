"""What fresh memory costs on this machine: first touch of new pages against a second touch, one thread and
several, and the mapper's copy-back pattern (a page-locked-sized block copied into new memory, freed, again).
Prints GB/s for each; also the kernel's transparent huge page settings. argv: GiB to touch, the threads of the
first touch. Run it twice to see whether memory a finished process gave back is fresh again to the next one (a
VM that returns freed pages to its host). Seen 2026-11-30: first touch 0.4-0.9 GB/s on the 2-core development VM
(13-37 GB/s recycled), 3.4-6.5 GB/s on the GPU machine (9.6-11.2 GB/s a second touch), BENCHMARKS.md."""
import sys
import threading
import time

import numpy as np

GB = 1 << 30


def timed(label, nbytes, fn):
    t = time.perf_counter()
    fn()
    dt = time.perf_counter() - t
    print(f"{label:58s} {nbytes / GB:5.2f} GiB {dt * 1000:8.1f} ms {nbytes / dt / 1e9:7.2f} GB/s", flush=True)


def first_and_second_touch(nbytes):
    a = np.empty(nbytes, dtype=np.uint8)
    timed("first touch (np.empty then fill), 1 thread", nbytes, lambda: a.fill(1))
    timed("second touch, same array, 1 thread", nbytes, lambda: a.fill(2))
    del a


def threads_first_touch(nbytes, n):
    arrays = [np.empty(nbytes // n, dtype=np.uint8) for _ in range(n)]
    def go():
        ts = [threading.Thread(target=a.fill, args=(3,)) for a in arrays]
        [t.start() for t in ts]
        [t.join() for t in ts]
    timed(f"first touch, {n} threads", nbytes, go)
    timed(f"second touch, {n} threads", nbytes, go)


def copy_back_pattern(block, times):
    src = np.ones(block, dtype=np.uint8)
    def fresh():
        for _ in range(times):
            b = src.copy()
            del b
    def kept():
        out = [src.copy() for _ in range(times)]
        return out
    dst = np.empty(block, dtype=np.uint8)
    dst.fill(0)
    def reused():
        for _ in range(times):
            np.copyto(dst, src)
    timed(f"copy {block >> 20} MiB into new memory, freed, x{times}", block * times, fresh)
    timed(f"copy {block >> 20} MiB into new memory, kept, x{times}", block * times, kept)
    timed(f"copy {block >> 20} MiB into the same memory, x{times}", block * times, reused)


if __name__ == "__main__":
    for f in ("enabled", "defrag"):
        try:
            print(f"THP {f}:", open(f"/sys/kernel/mm/transparent_hugepage/{f}").read().strip())
        except OSError as e:
            print(f"THP {f}: {e}")
    size = int(float(sys.argv[1]) * GB) if len(sys.argv) > 1 else 2 * GB
    first = int(sys.argv[2]) if len(sys.argv) > 2 else 1   # the threads of the process's first touch
    if first > 1:
        threads_first_touch(size, first)
    first_and_second_touch(size)
    for n in (4, 16):
        threads_first_touch(size, n)
    copy_back_pattern(64 << 20, 16)
    copy_back_pattern(8 << 20, 64)
