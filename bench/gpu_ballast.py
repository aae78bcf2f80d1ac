#!/usr/bin/env python3
"""Hold GPU memory so that about FREE_GIB GiB stay free, until killed: a 24 GB card emulated on a larger one.

    python3 bench/gpu_ballast.py 22.5 &   # prints "ballast: N GiB held, F GiB free" once it holds it
"""
import sys
import time

from gpualign import cuda_driver as driver

want_free = float(sys.argv[1]) * (1 << 30)
driver.init()
free, total = driver.memory_info()
held = []
while free - want_free > 256 << 20:
    step = int(min(free - want_free, 1 << 30))
    held.append(driver.device_array(step))
    free, total = driver.memory_info()
print(f"ballast: {sum(a.nbytes for a in held) / (1 << 30):.1f} GiB held, {free / (1 << 30):.1f} GiB free "
      f"of {total / (1 << 30):.1f}", flush=True)
while True:
    time.sleep(60)
