"""Process-wide allocator settings for `gpualign map`.

Every batch allocates arrays of tens of megabytes (parsed reads, their encodings, BAM records),
frees them, and allocates the same again for the next batch. glibc serves such sizes with fresh
mmap()s and returns them at free(), so every batch pays a page fault per 4 KiB it touches, and
threads faulting at once queue on the kernel's lock of the address space. On the 16-core GPU host
that was 8 of 54 CPU-seconds in the kernel for 4 M reads, and 1.3 s of wall; one arena that keeps
freed memory (as MALLOC_ARENA_MAX=1 MALLOC_MMAP_THRESHOLD_=... would) brought the kernel's share to 4 s.
Small allocations still come from each thread's cache (tcache) without the arena's lock.
"""

import ctypes
import ctypes.util

M_TRIM_THRESHOLD, M_TOP_PAD, M_MMAP_THRESHOLD, M_ARENA_MAX = -1, -2, -3, -8
KEEP = 1 << 30   # bytes: allocations below go to the heap, and freed memory up to this stays there


def keep_freed_memory() -> bool:
    """Tell glibc's malloc to reuse freed big blocks (before the mapping threads start); False where
    the C library is not glibc or refuses, which changes nothing but speed."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    return all([mallopt(M_ARENA_MAX, 1), mallopt(M_MMAP_THRESHOLD, KEEP), mallopt(M_TRIM_THRESHOLD, KEEP),
                mallopt(M_TOP_PAD, 256 << 20)])
