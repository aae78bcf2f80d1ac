"""BGZF blocks compressed by ISA-L from numba: a task of many blocks in one call, without the GIL.

python-isal deflates one buffer per Python call, so a thread compressing 64 KiB blocks takes the
GIL back after every block (and again for the CRC and the header). With 16 threads that handoff
became the limit: on the 16-core GPU host, 10 M records took 81 thread-seconds of compression,
36 MB/s a thread against ISA-L's 260 MB/s alone (and 12 MB/s on a 2-core machine beside one busy
Python thread). ISA-L's C functions are exported by python-isal's extension module; numba calls
them through ctypes function pointers handed in as arguments (so the compiled code is cached).
The stream is set up as python-isal's `isal_zlib.compress(data, level, wbits=-15)` sets it up, so
the compression is the same (byte for byte here; one CI machine's python-isal once wrote a block
one byte shorter). Each block is its own stream, so its bytes depend on its slice alone.

`compress_blocks` is None where python-isal or its symbols are missing; bgzf.py then deflates a
block at a time in Python.
"""

import ctypes

import numpy as np
from numba import njit

from ..jitcache import use_versioned_cache

use_versioned_cache()  # before any @njit below

BGZF_MAX = 1 << 16    # a block's size limit
HEADER = np.frombuffer(b"\x1f\x8b\x08\x04\x00\x00\x00\x00\x00\xff\x06\x00BC\x02\x00", dtype=np.uint8).copy()

# struct isal_zstream of ISA-L 2.32 (include/igzip_lib.h): the public fields' byte offsets; the
# internal state after them is about 83 KB and 32-byte aligned
NEXT_IN, AVAIL_IN, NEXT_OUT, AVAIL_OUT, TOTAL_OUT = 0, 8, 16, 24, 28
LEVEL, LEVEL_BUF_SIZE, LEVEL_BUF, END_OF_STREAM, FLUSH, GZIP_FLAG, HIST_BITS = 40, 44, 48, 56, 58, 60, 62
ZSTREAM_BYTES = 1 << 18
# level_buf sizes of MEM_LEVEL_DEFAULT (ISAL_DEF_LVLn_LARGE), as python-isal uses them
K = 1024
LEVEL_BUF_BYTES = np.array([0, 20 * K + 256 * K, 68 * K + 256 * K, 84 * K + 256 * K], dtype=np.int64)


@njit(cache=True, nogil=True)
def put_le(buf, off, value, nbytes):
    for i in range(nbytes):
        buf[off + i] = (value >> (8 * i)) & 0xFF


@njit(cache=True, nogil=True)
def get_le(buf, off, nbytes):
    v = 0
    for i in range(nbytes):
        v |= np.int64(buf[off + i]) << (8 * i)
    return v


@njit(cache=True, nogil=True)
def bgzf_compress(data, block_input, level, init, deflate, crc32):
    """(blocks, sizes): data cut into BGZF blocks of block_input bytes (the last shorter), each a gzip
    member holding one raw deflate stream; sizes: each block's bytes. (empty, -1) if ISA-L failed."""
    n = data.shape[0]
    nblocks = (n + block_input - 1) // block_input
    out = np.empty(nblocks * BGZF_MAX, dtype=np.uint8)
    sizes = np.zeros(nblocks, dtype=np.int64)
    raw = np.zeros(ZSTREAM_BYTES + 64, dtype=np.uint8)
    skip = (64 - np.int64(raw.ctypes.data) % 64) % 64   # the internal state wants 32-byte alignment
    zs = raw[skip:skip + ZSTREAM_BYTES]
    zs_at = np.int64(zs.ctypes.data)
    level_buf = np.zeros(max(LEVEL_BUF_BYTES[level], 1), dtype=np.uint8)
    data_at, out_at = np.int64(data.ctypes.data), np.int64(out.ctypes.data)
    o = 0
    for b in range(nblocks):
        s = b * block_input
        size = min(block_input, n - s)
        room = BGZF_MAX - 26
        init(zs_at)
        put_le(zs, LEVEL, level, 4)
        put_le(zs, LEVEL_BUF_SIZE, LEVEL_BUF_BYTES[level], 4)
        put_le(zs, LEVEL_BUF, np.int64(level_buf.ctypes.data), 8)
        put_le(zs, HIST_BITS, 15, 2)
        put_le(zs, GZIP_FLAG, 0, 2)
        put_le(zs, NEXT_IN, data_at + s, 8)
        put_le(zs, AVAIL_IN, size, 4)
        put_le(zs, NEXT_OUT, out_at + o + 18, 8)
        put_le(zs, AVAIL_OUT, room, 4)
        put_le(zs, END_OF_STREAM, 1, 2)
        put_le(zs, FLUSH, 0, 2)
        if deflate(zs_at) != 0 or get_le(zs, AVAIL_IN, 4) != 0 or get_le(zs, AVAIL_OUT, 4) == 0:
            return out[:0], np.full(1, -1, dtype=np.int64)
        clen = get_le(zs, TOTAL_OUT, 4)
        out[o:o + 16] = HEADER
        put_le(out, o + 16, clen + 25, 2)                    # BSIZE: the block's size - 1
        put_le(out, o + 18 + clen, crc32(0, data_at + s, size), 4)
        put_le(out, o + 22 + clen, size, 4)
        sizes[b] = clen + 26
        o += clen + 26
    return out[:o], sizes


def _isal_functions():
    """(init, deflate, crc32) from python-isal's extension module, or None."""
    try:
        from isal import isal_zlib
        lib = ctypes.CDLL(isal_zlib.__file__)
        init, deflate, crc32 = lib.isal_deflate_init, lib.isal_deflate, lib.crc32_gzip_refl
    except (ImportError, OSError, AttributeError):
        return None
    init.argtypes, init.restype = (ctypes.c_size_t,), None
    deflate.argtypes, deflate.restype = (ctypes.c_size_t,), ctypes.c_int
    crc32.argtypes, crc32.restype = (ctypes.c_uint32, ctypes.c_size_t, ctypes.c_uint64), ctypes.c_uint32
    return init, deflate, crc32


_FUNCTIONS = _isal_functions()


def _compress_blocks(data: np.ndarray, block_input: int, level: int):
    """data (uint8) as consecutive BGZF blocks of block_input bytes (at most 0xFF00) at ISA-L level
    1-3: (bytes as uint8, block sizes)."""
    blocks, sizes = bgzf_compress(np.ascontiguousarray(data, dtype=np.uint8), block_input, level, *_FUNCTIONS)
    if len(sizes) and sizes[0] < 0:
        raise RuntimeError(f"ISA-L deflate failed at level {level}")
    return blocks, sizes


compress_blocks = _compress_blocks if _FUNCTIONS is not None else None
