"""BGZF: the BAM byte stream cut into blocks of at most 64 KiB and deflated on several threads
(zlib and ISA-L release the GIL), written in order; the compressed offset of every block is kept
for the index (SAM specification, section 4.1)."""

import collections
import struct
import zlib
from concurrent.futures import ThreadPoolExecutor

import numpy as np

try:  # ISA-L deflates several times faster than zlib at low levels; optional
    from isal import isal_zlib
    crc32 = isal_zlib.crc32
except ImportError:  # pragma: no cover
    isal_zlib = None
    crc32 = zlib.crc32

from .. import trace
from ..output import open_binary
from .deflate import compress_blocks


BGZF_INPUT = 0xFF00          # bytes of input per block, as htslib


BGZF_EOF = bytes.fromhex("1f8b08040000000000ff0600424302001b0003000000000000000000")


def bgzf_block(data, level: int) -> bytes:
    """One BGZF block: a gzip member with the BC extra field giving its size."""
    cdata = deflate(data, level)
    header = b"\x1f\x8b\x08\x04\x00\x00\x00\x00\x00\xff\x06\x00BC\x02\x00" + struct.pack("<H", len(cdata) + 25)
    return header + cdata + struct.pack("<II", crc32(data), len(data))


def deflate(data, level: int) -> bytes:
    """Raw deflate; levels 1-3 through ISA-L when installed (several times faster than zlib's 1)."""
    if isal_zlib is not None and 1 <= level <= 3:
        return isal_zlib.compress(data, level, wbits=-15)
    comp = zlib.compressobj(level, zlib.DEFLATED, -15)
    return comp.compress(data) + comp.flush()


def sized_bgzf_blocks(data, level: int):
    """BGZF blocks of data, all but the last of BGZF_INPUT bytes, with what an index needs to place
    records in them: (blocks, each block's compressed size, its input size). ISA-L's levels go
    through deflate.compress_blocks, all blocks in one call without the GIL; the same compression as
    block by block."""
    data = np.frombuffer(data, dtype=np.uint8)
    usizes = np.minimum(BGZF_INPUT, len(data) - np.arange(0, len(data), BGZF_INPUT))
    with trace.span("compress BGZF"):
        if compress_blocks is not None and 1 <= level <= 3:
            blocks, csizes = compress_blocks(data, BGZF_INPUT, level)
            return blocks, csizes, usizes
        blocks = [bgzf_block(data[i:i + BGZF_INPUT], level) for i in range(0, len(data), BGZF_INPUT)]
        return b"".join(blocks), np.array([len(b) for b in blocks], dtype=np.int64), usizes


BLOCKS_PER_TASK = 16   # blocks a task of the writer's pool: fewer, bigger tasks keep its overhead small


class BamWriter:
    """A BAM file written block by block. Blocks are compressed on a thread pool and written in
    order as they finish, so a caller can prepare the next data while earlier blocks compress."""

    def __init__(self, path: str, header, level: int = 6, threads: int = 1):
        self.level = level
        self.threads = max(1, threads)
        self.pool = ThreadPoolExecutor(max_workers=self.threads)
        self.jobs = collections.deque()
        self.pending = np.zeros(0, dtype=np.uint8)
        self.fh = open_binary(path)
        self.block_starts = []     # compressed offset of each block: virtual offsets for an index
        self.compressed = 0
        header = np.frombuffer(header_bytes(header), dtype=np.uint8)
        self.header_size = len(header)
        self.write(header)

    def write(self, data: np.ndarray):
        """Queue bytes (a uint8 array) for compression; whole blocks go now, the rest waits."""
        if len(self.pending):
            data = np.concatenate((self.pending, data))
        full = len(data) - len(data) % BGZF_INPUT
        task = BGZF_INPUT * BLOCKS_PER_TASK
        for i in range(0, full, task):
            self.jobs.append(self.pool.submit(sized_bgzf_blocks, data[i:min(full, i + task)], self.level))
        self.pending = data[full:].copy()
        self._drain(keep=2 * self.threads)

    def _drain(self, keep: int):
        """Write finished blocks in order; wait while more than `keep` are outstanding."""
        while self.jobs and (len(self.jobs) > keep or self.jobs[0].done()):
            blocks, csizes, _ = self.jobs.popleft().result()
            self.fh.write(blocks)
            self.block_starts.extend((self.compressed + np.cumsum(csizes) - csizes).tolist())
            self.compressed += len(blocks)

    def close(self):
        if len(self.pending):
            self.jobs.append(self.pool.submit(sized_bgzf_blocks, self.pending, self.level))
        self._drain(keep=0)
        self.block_starts.append(self.compressed)   # where a record ending the stream points
        self.fh.write(BGZF_EOF)
        self.fh.close()
        self.pool.shutdown()

    def __enter__(self):
        return self

    def abort(self):
        """Stop after an error: pending blocks dropped, the file closed as it is (the caller removes it)."""
        for job in self.jobs:
            job.cancel()
        self.fh.close()
        self.pool.shutdown()

    def __exit__(self, *exc):
        if exc[0] is None:
            self.close()
        else:
            self.abort()


def header_bytes(header) -> bytes:
    """The BAM header: magic, SAM header text, and the reference list (from a pysam.AlignmentHeader)."""
    text = str(header).encode()
    out = [b"BAM\x01", struct.pack("<i", len(text)), text, struct.pack("<i", len(header.references))]
    for name, length in zip(header.references, header.lengths):
        out += [struct.pack("<i", len(name) + 1), name.encode() + b"\x00", struct.pack("<i", length)]
    return b"".join(out)
