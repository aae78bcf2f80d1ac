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
from concurrent.futures import ThreadPoolExecutor

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


@njit(cache=True, nogil=True, inline="always")   # a call a field: index_fields 10-20% slower
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
    fields = np.empty((6, n), dtype=np.int64)
    o = 0
    for r in range(n):
        record_fields(buf, o, fields, r)
        o += fields[0, r]
    return fields


@njit(cache=True, nogil=True)
def spans_in_order(buf, starts, order):
    """What the index needs of each record that no sort key holds, for the records of buf (record i
    at buf[starts[i]]) taken in `order`: rows (end, bin, flag), as int32, uint16 and uint16 (the
    sorted sink keeps them beside each record's key, so that its tail reads no record back). The
    records are read in buffer order, then the rows put in `order`: read in that order they took
    three times as long."""
    n = order.shape[0]
    fields = np.empty((6, n), dtype=np.int64)
    for i in range(n):
        record_fields(buf, starts[i], fields, i)
    end = np.empty(n, dtype=np.int32)
    bins = np.empty(n, dtype=np.uint16)
    flag = np.empty(n, dtype=np.uint16)
    for r in range(n):
        i = order[r]
        end[r], bins[r], flag[r] = fields[3, i], fields[4, i], fields[5, i]
    return end, bins, flag


@njit(cache=True, nogil=True)
def record_fields(buf, o, fields, r):
    """index_fields' column r (size, refID, pos, end, bin, flag) from the record at buf[o]."""
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


def build_bai(n_ref: int, tid, pos, end, bins, flag, vstart, vend, threads: int = 1) -> bytes:
    """The .bai bytes for records in coordinate order with their start and end virtual offsets, each
    reference's records indexed in pieces side by side on `threads` threads (joined_pieces)."""
    out = [b"BAI\x01", struct.pack("<i", n_ref)]
    n_records = len(tid)
    n_placed = placed_prefix(tid)
    if n_placed < 0:   # coordinate order puts the placed records first; else gather them
        keep = np.flatnonzero(tid >= 0)
        n_placed = len(keep)
        tid, pos, end, bins, flag, vstart, vend = (a[keep] for a in (tid, pos, end, bins, flag, vstart, vend))
    bounds = np.searchsorted(tid[:n_placed], np.arange(n_ref + 1))
    pieces = [(ref, a, b) for ref in range(n_ref) for a, b in piece_ranges(bounds[ref], bounds[ref + 1], threads)]

    def indexed(piece):
        rows = slice(piece[1], piece[2])   # views, not copies
        return piece[0], piece_index(pos[rows], end[rows], bins[rows], flag[rows], vstart[rows], vend[rows])

    done = {}
    with ThreadPoolExecutor(max_workers=max(1, min(threads, len(pieces)))) as pool:
        for ref, result in pool.map(indexed, pieces):
            done.setdefault(ref, []).append(result)
    for ref in range(n_ref):
        mine = done.get(ref)
        if not mine:
            out.append(struct.pack("<ii", 0, 0))
            continue
        first, last = bounds[ref], bounds[ref + 1] - 1
        out.append(reference_index(*joined_pieces(mine), int(vstart[first]), int(vend[last]), last + 1 - first))
    out.append(struct.pack("<Q", n_records - n_placed))
    return b"".join(out)


# A reference's records are indexed in pieces of at least PIECE_RECORDS (at most one a thread): the .bai of 10 M
# records took 0.11 s on one thread of the GPU host, after the BAM's last byte.
PIECE_RECORDS = 1 << 18


def piece_ranges(first: int, end: int, threads: int):
    """[a, b) row ranges cutting rows first..end-1 into pieces for piece_index (none if empty)."""
    n = end - first
    pieces = max(1, min(threads, n // PIECE_RECORDS))
    cuts = [first + n * j // pieces for j in range(pieces + 1)]
    return [(a, b) for a, b in zip(cuts, cuts[1:]) if b > a]


@njit(cache=True, nogil=True)
def placed_prefix(tid):
    """How many records lead with a reference (tid >= 0) when all the rest have none, else -1."""
    n = tid.shape[0]
    p = 0
    while p < n and tid[p] >= 0:
        p += 1
    for r in range(p, n):
        if tid[r] >= 0:
            return -1
    return p


@njit(cache=True, nogil=True)
def piece_index(pos, end, bins, flag, vstart, vend):
    """One piece's share of its reference's index: its chunks (bin_chunks), the smallest start offset
    per 16 kbp window its records overlap (window_starts), and how many of them are unmapped."""
    chunk_bin, chunk_beg, chunk_end = bin_chunks(bins, vstart, vend)
    unmapped = 0
    for r in range(flag.shape[0]):
        if flag[r] & FLAG_UNMAPPED:
            unmapped += 1
    return chunk_bin, chunk_beg, chunk_end, window_starts(pos, end, vstart), unmapped


def joined_pieces(pieces):
    """A reference's chunks, window offsets and unmapped count from its pieces' (piece_index's, in
    record order): each bin's chunks in record order, one merged with the last before it where it
    starts where that one ended (the pieces cut a chunk at their ends); each window's smallest start."""
    if len(pieces) == 1:
        return pieces[0]
    chunk_bin, chunk_beg, chunk_end, starts, unmapped = zip(*pieces)
    chunk_bin = np.concatenate(chunk_bin)
    order = np.argsort(chunk_bin, kind="stable")
    merged = merge_touching(chunk_bin[order], np.concatenate(chunk_beg)[order], np.concatenate(chunk_end)[order])
    windows = np.full(max(len(s) for s in starts), UNSET, dtype=np.uint64)
    for s in starts:
        np.minimum(windows[:len(s)], s, out=windows[:len(s)])
    return (*merged, windows, sum(unmapped))


UNSET = np.iinfo(np.uint64).max   # a window no record overlaps (yet)


@njit(cache=True, nogil=True)
def merge_touching(chunk_bin, chunk_beg, chunk_end):
    """Chunks (by bin, each bin's in record order) with each that starts where the one before it in
    its bin ended merged into that one."""
    m = chunk_bin.shape[0]
    keep = np.zeros(m, dtype=np.bool_)
    end = chunk_end.copy()
    last = -1
    for c in range(m):
        if last >= 0 and chunk_bin[c] == chunk_bin[last] and chunk_beg[c] == end[last]:
            end[last] = chunk_end[c]
        else:
            keep[c] = True
            last = c
    return chunk_bin[keep], chunk_beg[keep], end[keep]


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


def reference_index(chunk_bin, chunk_beg, chunk_end, starts, unmapped, first_start, last_end, n) -> bytes:
    """A reference's part of the .bai from its chunks and window offsets (joined_pieces'), the start of
    its first record, the end of its last, and its n records (of which `unmapped` unmapped)."""
    bin_ids, bin_first = np.unique(chunk_bin, return_index=True)
    bin_last = np.append(bin_first[1:], len(chunk_bin))
    parts = [struct.pack("<i", len(bin_ids) + 1)]
    for bid, a, z in zip(bin_ids, bin_first, bin_last):
        parts.append(struct.pack("<Ii", int(bid), int(z - a)))
        parts.append(np.column_stack((chunk_beg[a:z], chunk_end[a:z])).astype("<u8").tobytes())
    parts.append(struct.pack("<IiQQQQ", PSEUDO_BIN, 2, first_start, last_end, n - unmapped, unmapped))
    offsets = filled_windows(starts)
    parts.append(struct.pack("<i", len(offsets)) + offsets.astype("<u8").tobytes())
    return b"".join(parts)


@njit(cache=True, nogil=True)
def window_starts(pos, end, vstart):
    """Per 16 kbp window up to the last one the records overlap, the smallest start offset of a record
    overlapping it (UNSET for none)."""
    n_win = 0
    for r in range(pos.shape[0]):
        last = (max(end[r], pos[r] + 1) - 1) >> LINEAR_SHIFT
        if last + 1 > n_win:
            n_win = last + 1
    offsets = np.full(n_win, UNSET, dtype=np.uint64)
    for r in range(pos.shape[0]):
        for w in range(pos[r] >> LINEAR_SHIFT, ((max(end[r], pos[r] + 1) - 1) >> LINEAR_SHIFT) + 1):
            if vstart[r] < offsets[w]:
                offsets[w] = vstart[r]
    return offsets


@njit(cache=True, nogil=True)
def filled_windows(offsets):
    """The linear index from window_starts': an empty window takes the largest value of the windows
    before it (0 before any)."""
    offsets = offsets.copy()
    running = np.uint64(0)
    for w in range(offsets.shape[0]):
        if offsets[w] == UNSET:
            offsets[w] = running
        elif offsets[w] > running:
            running = offsets[w]
    return offsets
