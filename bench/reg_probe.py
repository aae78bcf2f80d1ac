"""Could the index go up to the GPU straight from the page cache? Page-locks one chunk of a memory-mapped
index where it lies (cuMemHostRegister), copies it up, checks it and times each step.

    timeout 25 python3 bench/reg_probe.py PREFIX.idx.npz MODE MIB FLAGS     # on the GPU machine

MODE: index (load_index's own mapping), private (a new copy-on-write mapping of the file) or anon (a copy in
ordinary memory, the baseline); FLAGS: 0, or 8 (CU_MEMHOSTREGISTER_READ_ONLY: the pages are not written). On
the H200 host (2026-11-26, positions of a 1 Gbp k=13 index in the page cache): anon 64 MiB registered at 31.6
GB/s and copied at 41.6 GB/s; private with flags 0 registered at 2.8 GB/s (write access: every page is copied
out of the page cache first); with flags 8, index or private, 4 or 64 MiB, the registration did not return in
25 s (nor in 7 minutes, 64 MiB chunks on 4 threads, in bench/upload.py's first try). So upload_from_file's
pread into page-locked buffers (10-13 GB/s on 4 threads) stays.
"""
import ctypes
import mmap
import sys
import time

import numpy as np

from gpualign import cuda_driver as driver
from gpualign.index import load_index

PAGE = mmap.PAGESIZE
driver.init()
driver._bind()
arr = load_index(sys.argv[1]).positions
mode = sys.argv[2]   # index, private or anon
size = int(sys.argv[3]) << 20
flags = int(sys.argv[4])
if mode == "private":
    arr = np.memmap(arr.filename, dtype=arr.dtype, mode="c", offset=arr.offset, shape=arr.shape)
elif mode == "anon":
    arr = np.array(arr[: size // 4 + 4096])
base = arr.ctypes.data
lo, hi = base & ~(PAGE - 1), (base + size + PAGE - 1) & ~(PAGE - 1)
t = time.perf_counter()
driver._call("cuMemHostRegister_v2", ctypes.c_void_p(lo), ctypes.c_size_t(hi - lo), flags)
t1 = time.perf_counter()
dev = driver.device_array(size, np.uint8)
driver._call("cuMemcpyHtoD_v2", ctypes.c_uint64(dev.ptr), ctypes.c_void_p(base), ctypes.c_size_t(size))
t2 = time.perf_counter()
driver._call("cuMemHostUnregister", ctypes.c_void_p(lo))
t3 = time.perf_counter()
ok = np.array_equal(dev.copy_to_host().view(arr.dtype), np.asarray(arr[: size // 4]))
print(f"{mode} {size >> 20} MiB flags {flags}: register {t1 - t:.4f} s ({size / (t1 - t) / 1e9:.1f} GB/s), "
      f"copy {t2 - t1:.4f} s ({size / (t2 - t1) / 1e9:.1f} GB/s), unregister {t3 - t2:.4f} s, equal {ok}", flush=True)
