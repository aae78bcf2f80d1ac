"""BAM output without a Python object per read.

Records are encoded straight into one byte buffer per batch by numba (two passes: sizes, then
bytes at prefix-summed offsets), and the byte stream is cut into BGZF blocks that are deflated on
several threads (zlib and ISA-L release the GIL). Layout and bin numbers follow the SAM
specification (section 4.2); integer tags are written as int32 ('i'), which readers treat alike.
"""

import collections
import struct
import zlib
from concurrent.futures import ThreadPoolExecutor

import numpy as np
from numba import njit

try:  # ISA-L deflates several times faster than zlib at low levels; optional
    from isal import isal_zlib
    crc32 = isal_zlib.crc32
except ImportError:  # pragma: no cover
    isal_zlib = None
    crc32 = zlib.crc32

from .core import OP_D, OP_I, OP_M, OP_S, STRAND_BIT, base_at, contig_of
from .jitcache import use_versioned_cache
from .output import open_binary

use_versioned_cache()  # before any @njit below: numba picks the cache folder at decoration

BGZF_INPUT = 0xFF00          # bytes of input per block, as htslib
BGZF_EOF = bytes.fromhex("1f8b08040000000000ff0600424302001b0003000000000000000000")
SEQ_NIBBLE = np.array([1, 2, 4, 8, 15], dtype=np.uint8)   # A C G T N in BAM's 4-bit code
BASE_CHAR = np.frombuffer(b"ACGTN", dtype=np.uint8)
FLAG_PAIRED, FLAG_PROPER, FLAG_UNMAPPED, FLAG_MATE_UNMAPPED = 0x1, 0x2, 0x4, 0x8
FLAG_REVERSE, FLAG_MATE_REVERSE, FLAG_READ1, FLAG_READ2 = 0x10, 0x20, 0x40, 0x80
CIGAR_CHARS = np.frombuffer(b"MIDNSHP=X", dtype=np.uint8)
# columns of record_fields
F_FLAG, F_RID, F_POS, F_END, F_MRID, F_MPOS, F_TLEN, F_MQ = range(8)


@njit(cache=True, nogil=True)
def reg2bin(beg, end):
    """BAM index bin of the 0-based half-open interval [beg, end)."""
    end -= 1
    if beg >> 14 == end >> 14:
        return 4681 + (beg >> 14)
    if beg >> 17 == end >> 17:
        return 585 + (beg >> 17)
    if beg >> 20 == end >> 20:
        return 73 + (beg >> 20)
    if beg >> 23 == end >> 23:
        return 9 + (beg >> 23)
    if beg >> 26 == end >> 26:
        return 1 + (beg >> 26)
    return 0


@njit(cache=True, nogil=True)
def put_int(buf, off, value, nbytes, write):
    """Little-endian integer of nbytes at off; returns the offset after it."""
    if write:
        v = value & ((1 << (8 * nbytes)) - 1)
        for i in range(nbytes):
            buf[off + i] = (v >> (8 * i)) & 0xFF
    return off + nbytes


@njit(cache=True, nogil=True)
def put_decimal(buf, off, value, write):
    """A non-negative integer in decimal digits."""
    digits = 1
    v = value
    while v >= 10:
        v //= 10
        digits += 1
    if write:
        v = value
        for i in range(digits - 1, -1, -1):
            buf[off + i] = 48 + v % 10
            v //= 10
    return off + digits


@njit(cache=True, nogil=True)
def put_int_tag(buf, off, c1, c2, value, write):
    if write:
        buf[off] = c1
        buf[off + 1] = c2
        buf[off + 2] = 105  # 'i'
    return put_int(buf, off + 3, value, 4, write)


@njit(cache=True, nogil=True)
def md_and_nm(q, qoff, ops, lens, obase, nops, qs, g_packed, g_nmask, gstart, buf, off, write):
    """Write the MD string (no terminator) from off; returns (end offset, NM).

    N in the read or the reference counts as a mismatch, as it scores as one.
    """
    run = 0
    nm = 0
    qi = qoff + qs
    gi = gstart
    for x in range(nops):
        op = ops[obase + x]
        ln = lens[obase + x]
        if op == OP_M:
            for y in range(ln):
                rb = base_at(g_packed, g_nmask, gi + y)
                qb = q[qi + y]
                if qb != rb or qb == 4 or rb == 4:
                    off = put_decimal(buf, off, run, write)
                    if write:
                        buf[off] = BASE_CHAR[rb]
                    off += 1
                    run = 0
                    nm += 1
                else:
                    run += 1
            qi += ln
            gi += ln
        elif op == OP_I:
            qi += ln
            nm += ln
        elif op == OP_D:
            off = put_decimal(buf, off, run, write)
            if write:
                buf[off] = 94  # '^'
            off += 1
            for y in range(ln):
                if write:
                    buf[off] = BASE_CHAR[base_at(g_packed, g_nmask, gi + y)]
                off += 1
            run = 0
            nm += ln
            gi += ln
    off = put_decimal(buf, off, run, write)
    return off, nm


@njit(cache=True, nogil=True)
def record_fields(row_of, key, mapq, proper, trace, ops, lens, maxops, c_off, paired):
    """Per read: flag, refID, pos, end, mate refID, mate pos, TLEN, mate MAPQ (-1: no MQ tag).

    Paired batches interleave mates (read r's mate is r ^ 1). An unmapped read whose mate mapped
    takes the mate's refID and pos (as samtools expects, so it sorts next to it); TLEN runs from
    this read's 5' end to its mate's, as samtools fixmate computes it.
    """
    n = row_of.shape[0]
    f = np.full((n, 8), -1, dtype=np.int64)
    for r in range(n):
        row = row_of[r]
        f[r, F_FLAG] = FLAG_UNMAPPED
        f[r, F_TLEN] = 0
        if row >= 0:
            gstart = trace[row, 2]
            rid = contig_of(c_off, gstart)
            span = 0
            for x in range(trace[row, 5]):
                if ops[row * maxops + x] == OP_M or ops[row * maxops + x] == OP_D:
                    span += lens[row * maxops + x]
            f[r, F_FLAG] = FLAG_REVERSE if key[r] >= STRAND_BIT else 0
            f[r, F_RID] = rid
            f[r, F_POS] = gstart - c_off[rid]
            f[r, F_END] = gstart - c_off[rid] + span
    if not paired:
        return f
    for r in range(n):
        m = r ^ 1
        mine = row_of[r] >= 0
        mates = row_of[m] >= 0
        flag = f[r, F_FLAG] | FLAG_PAIRED | (FLAG_READ1 if r % 2 == 0 else FLAG_READ2)
        if not mates:
            flag |= FLAG_MATE_UNMAPPED
        elif f[m, F_FLAG] & FLAG_REVERSE:
            flag |= FLAG_MATE_REVERSE
        if mine and mates and proper[r]:
            flag |= FLAG_PROPER
        f[r, F_FLAG] = flag
    for r in range(n):
        m = r ^ 1
        mine = row_of[r] >= 0
        mates = row_of[m] >= 0
        if mates:
            f[r, F_MRID] = f[m, F_RID]
            f[r, F_MPOS] = f[m, F_POS]
            f[r, F_MQ] = mapq[m]
            if not mine:   # placed at its mate
                f[r, F_RID] = f[m, F_RID]
                f[r, F_POS] = f[m, F_POS]
        elif mine:
            f[r, F_MRID] = f[r, F_RID]
            f[r, F_MPOS] = f[r, F_POS]
        if mine and mates and f[r, F_RID] == f[m, F_RID]:
            five = f[r, F_END] if f[r, F_FLAG] & FLAG_REVERSE else f[r, F_POS]
            mate_five = f[m, F_END] if f[m, F_FLAG] & FLAG_REVERSE else f[m, F_POS]
            f[r, F_TLEN] = mate_five - five
    return f


@njit(cache=True, nogil=True)
def put_cigar_text(buf, off, row, n, ops, lens, maxops, trace, write):
    """The CIGAR of traceback row `row` (read length n) as text, soft clips included (the MC tag)."""
    qs = trace[row, 1]
    qe = trace[row, 3]
    if qs > 0:
        off = put_decimal(buf, off, qs, write)
        if write:
            buf[off] = 83   # 'S'
        off += 1
    for x in range(trace[row, 5]):
        off = put_decimal(buf, off, lens[row * maxops + x], write)
        if write:
            buf[off] = CIGAR_CHARS[ops[row * maxops + x]]
        off += 1
    if qe < n:
        off = put_decimal(buf, off, n - qe, write)
        if write:
            buf[off] = 83
        off += 1
    return off


@njit(cache=True, nogil=True)
def encode_record(r, row, names, name_off, codes, rc_codes, quals, read_off, key, mapq, score, sub,
                  ops, lens, maxops, trace, g_packed, g_nmask, c_off, rg, fields, mate_row, buf, off, write):
    """One BAM record of read r (row: its row in the traceback arrays, -1 if unmapped; fields: its
    record_fields row; mate_row: its mate's traceback row, -1 for none) at off.
    Returns the offset after it; with write False only measures."""
    start = off
    n = read_off[r + 1] - read_off[r]
    lname = name_off[r + 1] - name_off[r]
    reverse = row >= 0 and key[r] >= STRAND_BIT
    q = rc_codes if reverse else codes
    qoff = read_off[r]
    nops = 0
    qs = 0
    qe = n
    gstart = -1
    rid = -1
    pos = -1
    span = 0
    ncig = 0
    if row >= 0:
        nops = trace[row, 5]
        qs = trace[row, 1]
        qe = trace[row, 3]
        gstart = trace[row, 2]
        rid = contig_of(c_off, gstart)
        pos = gstart - c_off[rid]
        for x in range(nops):
            if ops[row * maxops + x] == OP_M or ops[row * maxops + x] == OP_D:
                span += lens[row * maxops + x]
        ncig = nops + (1 if qs > 0 else 0) + (1 if qe < n else 0)
    if row < 0:   # unmapped: placed at its mate's position when the mate mapped
        rid = fields[F_RID]
        pos = fields[F_POS]
    off += 4                                   # block_size, filled below
    off = put_int(buf, off, rid, 4, write)
    off = put_int(buf, off, pos, 4, write)
    off = put_int(buf, off, lname + 1, 1, write)
    off = put_int(buf, off, mapq[r] if row >= 0 else 0, 1, write)
    off = put_int(buf, off, reg2bin(pos, pos + max(span, 1)) if pos >= 0 else reg2bin(-1, 0), 2, write)
    off = put_int(buf, off, ncig, 2, write)
    off = put_int(buf, off, fields[F_FLAG], 2, write)
    off = put_int(buf, off, n, 4, write)
    off = put_int(buf, off, fields[F_MRID], 4, write)      # next refID
    off = put_int(buf, off, fields[F_MPOS], 4, write)      # next pos
    off = put_int(buf, off, fields[F_TLEN], 4, write)
    for i in range(lname):
        if write:
            buf[off + i] = names[name_off[r] + i]
    off += lname
    if write:
        buf[off] = 0
    off += 1
    if row >= 0:
        if qs > 0:
            off = put_int(buf, off, (qs << 4) | OP_S, 4, write)
        for x in range(nops):
            off = put_int(buf, off, (lens[row * maxops + x] << 4) | ops[row * maxops + x], 4, write)
        if qe < n:
            off = put_int(buf, off, ((n - qe) << 4) | OP_S, 4, write)
    for i in range(0, n, 2):
        if write:
            hi = SEQ_NIBBLE[q[qoff + i]] << 4
            lo = SEQ_NIBBLE[q[qoff + i + 1]] if i + 1 < n else 0
            buf[off] = hi | lo
        off += 1
    for i in range(n):
        if write:
            buf[off + i] = quals[qoff + (n - 1 - i if reverse else i)]
    off += n
    if row >= 0:
        # NM comes first (samtools' order), so the MD walk runs once to count and once to write
        _, nm = md_and_nm(q, qoff, ops, lens, row * maxops, nops, qs, g_packed, g_nmask, gstart, buf, off, False)
        off = put_int_tag(buf, off, 78, 77, nm, write)          # NM
        if write:
            buf[off] = 77   # 'M'
            buf[off + 1] = 68  # 'D'
            buf[off + 2] = 90  # 'Z'
        off, _ = md_and_nm(q, qoff, ops, lens, row * maxops, nops, qs, g_packed, g_nmask, gstart,
                           buf, off + 3, write)
        if write:
            buf[off] = 0
        off += 1
        off = put_int_tag(buf, off, 65, 83, score[r], write)    # AS
        if sub[r] >= 0:
            off = put_int_tag(buf, off, 88, 83, sub[r], write)  # XS
    if mate_row >= 0:
        if write:
            buf[off] = 77   # 'M'
            buf[off + 1] = 67  # 'C'
            buf[off + 2] = 90  # 'Z'
        m = r ^ 1
        off = put_cigar_text(buf, off + 3, mate_row, read_off[m + 1] - read_off[m], ops, lens, maxops, trace, write)
        if write:
            buf[off] = 0
        off += 1
        off = put_int_tag(buf, off, 77, 81, fields[F_MQ], write)   # MQ
    if rg.shape[0] > 0:
        if write:
            buf[off] = 82   # 'R'
            buf[off + 1] = 71  # 'G'
            buf[off + 2] = 90  # 'Z'
            for i in range(rg.shape[0]):
                buf[off + 3 + i] = rg[i]
            buf[off + 3 + rg.shape[0]] = 0
        off += 4 + rg.shape[0]
    put_int(buf, start, off - start - 4, 4, write)
    return off


UNMAPPED_KEY = np.iinfo(np.int64).max   # unmapped reads sort last, in input order


@njit(cache=True, nogil=True)
def encode_batch(row_of, names, name_off, codes, rc_codes, quals, read_off, key, mapq, score, sub,
                 ops, lens, maxops, trace, g_packed, g_nmask, c_off, rg, proper, paired):
    """All records of a batch, in read order: (bytes, record offsets[n+1], coordinate sort keys).

    Serial and GIL-free: batches are encoded side by side on threads while the next one maps.
    A sort key orders by contig, position, then forward before reverse strand (as samtools).
    """
    n = row_of.shape[0]
    fields = record_fields(row_of, key, mapq, proper, trace, ops, lens, maxops, c_off, paired)
    offsets = np.zeros(n + 1, dtype=np.int64)
    scratch = np.zeros(1, dtype=np.uint8)
    for r in range(n):
        mate_row = row_of[r ^ 1] if paired else -1
        offsets[r + 1] = offsets[r] + encode_record(
            r, row_of[r], names, name_off, codes, rc_codes, quals, read_off, key, mapq, score, sub, ops, lens,
            maxops, trace, g_packed, g_nmask, c_off, rg, fields[r], mate_row, scratch, 0, False)
    buf = np.empty(offsets[n], dtype=np.uint8)
    keys = np.full(n, UNMAPPED_KEY, dtype=np.int64)
    for r in range(n):
        mate_row = row_of[r ^ 1] if paired else -1
        encode_record(r, row_of[r], names, name_off, codes, rc_codes, quals, read_off, key, mapq, score, sub,
                      ops, lens, maxops, trace, g_packed, g_nmask, c_off, rg, fields[r], mate_row, buf, offsets[r], True)
        if fields[r, F_RID] >= 0:
            keys[r] = (fields[r, F_RID] << 33) | (fields[r, F_POS] << 1) | (1 if fields[r, F_FLAG] & FLAG_REVERSE else 0)
    return buf, offsets, keys


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


def bgzf_blocks(data, level: int) -> bytes:
    """Consecutive BGZF blocks of data (one task of the compression pool: fewer, bigger tasks
    keep the pool's per-task overhead small)."""
    return b"".join(bgzf_block(data[i:i + BGZF_INPUT], level) for i in range(0, len(data), BGZF_INPUT))


BLOCKS_PER_TASK = 16


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
            self.jobs.append(self.pool.submit(bgzf_blocks, data[i:min(full, i + task)], self.level))
        self.pending = data[full:].copy()
        self._drain(keep=2 * self.threads)

    def _drain(self, keep: int):
        """Write finished blocks in order; wait while more than `keep` are outstanding."""
        while self.jobs and (len(self.jobs) > keep or self.jobs[0].done()):
            blocks = self.jobs.popleft().result()
            self.fh.write(blocks)
            i = 0
            while i < len(blocks):   # BSIZE (block size - 1) sits at bytes 16-17 of a block
                self.block_starts.append(self.compressed + i)
                i += int.from_bytes(blocks[i + 16:i + 18], "little") + 1
            self.compressed += len(blocks)

    def close(self):
        if len(self.pending):
            self.jobs.append(self.pool.submit(bgzf_block, self.pending, self.level))
        self._drain(keep=0)
        self.block_starts.append(self.compressed)   # where a record ending the stream points
        self.fh.write(BGZF_EOF)
        self.fh.close()
        self.pool.shutdown()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if exc[0] is None:
            self.close()
        else:
            for job in self.jobs:
                job.cancel()
            self.fh.close()
            self.pool.shutdown()


def header_bytes(header) -> bytes:
    """The BAM header: magic, SAM header text, and the reference list (from a pysam.AlignmentHeader)."""
    text = str(header).encode()
    out = [b"BAM\x01", struct.pack("<i", len(text)), text, struct.pack("<i", len(header.references))]
    for name, length in zip(header.references, header.lengths):
        out += [struct.pack("<i", len(name) + 1), name.encode() + b"\x00", struct.pack("<i", length)]
    return b"".join(out)
