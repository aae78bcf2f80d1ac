"""libc's memmove for numba code, handed in as an argument (a ctypes function in a global would keep
the compiled code out of numba's cache).

numba's copy of one array slice into another is no memcpy: it checks the two for overlap and walks
the elements, which costs far more than the bytes for the short pieces a read is made of. Measured
on the 2-core machine: 2 M scattered BAM records of about 230 bytes gathered 0.6 s against 1.5 s
(bam/sort.gather_at); the mates of 50,000 pairs interleaved (codes, qualities, names) 2.0 against 12.8 ms.
"""

import ctypes


def _memmove():
    fn = ctypes.CDLL(None).memmove
    fn.argtypes, fn.restype = (ctypes.c_size_t, ctypes.c_size_t, ctypes.c_size_t), ctypes.c_size_t
    return fn


MEMMOVE = _memmove()   # called as memmove(destination address, source address, bytes)
