"""The .bai index of a coordinate-sorted BAM, built from the records as they are written (SAM
specification section 5.2), so no second pass re-reads and decompresses the BAM; and the bin
numbers (reg2bin, section 5.3) that the BAM encoder writes into each record.

Per reference: each bin's chunks of virtual offsets (contiguous records of a bin merged into one
chunk), the linear index (per 16 kbp window, the virtual offset of the first record overlapping
it; empty windows take the previous value), and the pseudo-bin 37450 with the reference's first
and last offsets and its mapped/unmapped counts. A virtual offset is the compressed offset of a
record's BGZF block shifted left 16 bits, plus the record's offset inside the block.
"""

import struct

import numpy as np
from numba import njit

from ..jitcache import use_versioned_cache
from ..sam import FLAG_UNMAPPED

use_versioned_cache()  # before any @njit below

PSEUDO_BIN = 37450
LINEAR_SHIFT = 14            # 16 kbp windows


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
def le32(buf, o, signed):
    """The little-endian 32-bit integer at buf[o]."""
    v = np.int64(buf[o]) | (np.int64(buf[o + 1]) << 8) | (np.int64(buf[o + 2]) << 16) | (np.int64(buf[o + 3]) << 24)
    return v - (1 << 32) if signed and v >= (1 << 31) else v


@njit(cache=True, nogil=True)
def index_fields(buf):
    """What the index needs of each record of a buffer of whole BAM records, read back from its
    bytes: rows (size, refID, pos, end, bin, flag), one column a record."""
    n = 0
    o = 0
    while o < buf.shape[0]:
        o += 4 + le32(buf, o, False)
        n += 1
    fields = np.empty((6, n), dtype=np.int64)   # size, refID, pos, end, bin, flag
    o = 0
    for r in range(n):
        fields[0, r] = 4 + le32(buf, o, False)
        fields[1, r] = le32(buf, o + 4, True)
        fields[2, r] = le32(buf, o + 8, True)
        l_name = buf[o + 12]
        fields[4, r] = buf[o + 14] | (buf[o + 15] << 8)
        n_cigar = buf[o + 16] | (buf[o + 17] << 8)
        fields[5, r] = buf[o + 18] | (buf[o + 19] << 8)
        span = 0
        for x in range(n_cigar):
            v = le32(buf, o + 36 + l_name + 4 * x, False)
            op = v & 15
            if op == 0 or op == 2 or op == 3 or op == 7 or op == 8:   # M D N = X consume the reference
                span += v >> 4
        fields[3, r] = fields[2, r] + (span if span > 0 else 1)
        o += fields[0, r]
    return fields


def build_bai(n_ref: int, tid, pos, end, bins, flag, vstart, vend) -> bytes:
    """The .bai bytes for records in coordinate order with their start and end virtual offsets."""
    out = [b"BAI\x01", struct.pack("<i", n_ref)]
    placed = tid >= 0
    n_placed = int(np.count_nonzero(placed))
    if not placed[:n_placed].all():   # coordinate order puts the placed records first; else gather them
        keep = np.flatnonzero(placed)
        tid, pos, end, bins, flag, vstart, vend = (a[keep] for a in (tid, pos, end, bins, flag, vstart, vend))
    bounds = np.searchsorted(tid[:n_placed], np.arange(n_ref + 1))
    for ref in range(n_ref):
        rows = slice(bounds[ref], bounds[ref + 1])   # views, not copies
        out.append(reference_index(pos[rows], end[rows], bins[rows], flag[rows], vstart[rows], vend[rows]))
    out.append(struct.pack("<Q", len(placed) - n_placed))
    return b"".join(out)


@njit(cache=True, nogil=True)
def bin_chunks(bins, vstart, vend):
    """Each bin's chunks, bins ascending, each bin's in record (coordinate) order: a new chunk where a
    bin's next record does not start where its last one ended. Returns (bin, begin, end) of every
    chunk. Two passes in record order, counting each bin's chunks and then filling them in, read the
    records in order; gathering them in bin order first (a counting sort) read them at random: 0.28 s
    of a .bai's 0.38 s for 10 M records on the 2-core machine, against 0.02 s."""
    n = bins.shape[0]
    nb = PSEUDO_BIN + 1
    first = np.zeros(nb + 1, dtype=np.int64)   # counts, then each bin's first chunk
    last_end = np.zeros(nb, dtype=np.uint64)
    seen = np.zeros(nb, dtype=np.bool_)
    for r in range(n):
        b = bins[r]
        if not seen[b] or vstart[r] != last_end[b]:
            first[b + 1] += 1
            seen[b] = True
        last_end[b] = vend[r]
    for b in range(nb):
        first[b + 1] += first[b]
    m = first[nb]
    chunk_bin = np.empty(m, dtype=np.int64)
    chunk_beg = np.empty(m, dtype=np.uint64)
    chunk_end = np.empty(m, dtype=np.uint64)
    open_chunk = np.full(nb, -1, dtype=np.int64)   # each bin's chunk being extended
    for r in range(n):
        b = bins[r]
        c = open_chunk[b]
        if c < 0 or vstart[r] != chunk_end[c]:
            c = first[b]
            first[b] += 1
            open_chunk[b] = c
            chunk_bin[c] = b
            chunk_beg[c] = vstart[r]
        chunk_end[c] = vend[r]
    return chunk_bin, chunk_beg, chunk_end


def reference_index(pos, end, bins, flag, vstart, vend) -> bytes:
    if len(pos) == 0:
        return struct.pack("<ii", 0, 0)
    chunk_bin, chunk_beg, chunk_end = bin_chunks(bins, vstart, vend)
    bin_ids, bin_first = np.unique(chunk_bin, return_index=True)
    bin_last = np.append(bin_first[1:], len(chunk_bin))
    parts = [struct.pack("<i", len(bin_ids) + 1)]
    for bid, a, z in zip(bin_ids, bin_first, bin_last):
        parts.append(struct.pack("<Ii", int(bid), int(z - a)))
        parts.append(np.column_stack((chunk_beg[a:z], chunk_end[a:z])).astype("<u8").tobytes())
    unmapped = int(np.count_nonzero(flag & FLAG_UNMAPPED))
    parts.append(struct.pack("<IiQQQQ", PSEUDO_BIN, 2, int(vstart[0]), int(vend[-1]),
                             len(pos) - unmapped, unmapped))
    offsets = linear_offsets(pos, end, vstart)
    parts.append(struct.pack("<i", len(offsets)) + offsets.astype("<u8").tobytes())
    return b"".join(parts)


@njit(cache=True, nogil=True)
def linear_offsets(pos, end, vstart):
    """Per 16 kbp window, the smallest start offset of a record overlapping it; an empty window
    takes the largest value of the windows before it (0 before any)."""
    n_win = 0
    for r in range(pos.shape[0]):
        last = (max(end[r], pos[r] + 1) - 1) >> LINEAR_SHIFT
        if last + 1 > n_win:
            n_win = last + 1
    unset = np.iinfo(np.uint64).max
    offsets = np.full(n_win, unset, dtype=np.uint64)
    for r in range(pos.shape[0]):
        for w in range(pos[r] >> LINEAR_SHIFT, ((max(end[r], pos[r] + 1) - 1) >> LINEAR_SHIFT) + 1):
            if vstart[r] < offsets[w]:
                offsets[w] = vstart[r]
    running = np.uint64(0)
    for w in range(n_win):
        if offsets[w] == unset:
            offsets[w] = running
        elif offsets[w] > running:
            running = offsets[w]
    return offsets
