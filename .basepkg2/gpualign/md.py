"""MD and NM of the chosen alignments, made where the traceback is (the traceback stage of either
backend), so that the BAM encoder only copies them: walking a read against the genome was the larger
part of encoding a record on the host (about 0.5 of 1.1 µs a 150 bp record on the 2-core machine).

- md_and_nm: one alignment's MD string and NM, read off the packed genome; the one implementation,
  run by the CPU backend (md_of_rows) and as a device function by the GPU's (cuda_kernels._md_kernel).
  N in the read or the reference counts as a mismatch, as it scores as one.
- MdNm: a batch's MD strings concatenated (row x's at text[off[x]:off[x + 1]], no terminator) and NM,
  rows as the traceback's.

An alignment's CIGAR is read from flat ops/lens at [obase + j * ostride]: a row of the host's
[rows, width] arrays (obase = x * width, ostride = 1), or the GPU's layout, op j of row x at
[j * rows + x] (obase = x, ostride = rows), which keeps a warp's loads together.
"""

from .jitcache import use_versioned_cache

use_versioned_cache()  # before any @njit below

from typing import NamedTuple

import numpy as np
from numba import njit, prange

from .encode import BASES, OP_D, OP_I, OP_M, STRAND_BIT, base_at
from .extend import TR_NOPS, TR_READ_START, TR_REF_START


class MdNm(NamedTuple):
    text: np.ndarray   # uint8: every row's MD, concatenated
    off: np.ndarray    # int64[rows + 1]: row x's MD is text[off[x]:off[x + 1]]
    nm: np.ndarray     # int64[rows]: edit distance to the reference (-1: an unmapped row)


@njit(cache=True, nogil=True)
def put_decimal(buf, off, value, write):
    """A non-negative integer in decimal digits at off; returns the offset after it."""
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
def md_and_nm(q, qoff, ops, lens, obase, ostride, trace, row, g_packed, g_nmask, buf, off, write):
    """Write the MD string (no terminator) of traceback row `row` from buf[off] (with write False,
    only measure it); returns (end offset, NM). q[qoff:]: the read's codes in reference orientation;
    its CIGAR at ops/lens[obase + j * ostride]."""
    run = 0
    nm = 0
    qi = qoff + trace[row, TR_READ_START]
    gi = trace[row, TR_REF_START]
    for x in range(trace[row, TR_NOPS]):
        op = ops[obase + x * ostride]
        ln = lens[obase + x * ostride]
        if op == OP_M:
            y = 0
            while y < ln:   # a genome word at a time: its bases shifted out, its N bits checked at once
                p = gi + y
                cnt = min(16 - (p & 15), ln - y)
                word = np.uint32(g_packed[p >> 4]) >> np.uint32(2 * (p & 15))
                no_n = (np.uint32(g_nmask[p >> 5]) >> np.uint32(p & 31)) & np.uint32((1 << cnt) - 1) == 0
                for z in range(cnt):
                    rb = word & 3 if no_n else base_at(g_packed, g_nmask, p + z)
                    word >>= np.uint32(2)
                    qb = q[qi + y + z]
                    if qb != rb or rb == 4:   # a read N (4) never equals a base
                        off = put_decimal(buf, off, run, write)
                        if write:
                            buf[off] = BASES[rb]
                        off += 1
                        run = 0
                        nm += 1
                    else:
                        run += 1
                y += cnt
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
                    buf[off] = BASES[base_at(g_packed, g_nmask, gi + y)]
                off += 1
            run = 0
            nm += ln
            gi += ln
    off = put_decimal(buf, off, run, write)
    return off, nm


@njit(cache=True, nogil=True)
def md_of_row(x, r, key, codes, rc_codes, read_off, ops, lens, obase, ostride, trace, g_packed, g_nmask, buf, off,
              write):
    """md_and_nm of traceback row x, read r placed at candidate key (its strand picks the read's
    orientation: rc_codes holds each read's reverse complement at the read's own offset); an
    unplaced read (key < 0) has an empty MD and NM -1."""
    if key < 0:
        return off, -1
    q = rc_codes if key >= STRAND_BIT else codes
    return md_and_nm(q, read_off[r], ops, lens, obase, ostride, trace, x, g_packed, g_nmask, buf, off, write)


@njit(parallel=True, cache=True)
def md_of_rows(sel_read, sel_key, codes, rc_codes, read_off, ops, lens, trace, g_packed, g_nmask):
    """MdNm fields (text, off, nm) of the traceback's rows, row x being read sel_read[x] at
    sel_key[x]; ops and lens: the host's [rows, width] CIGAR arrays. Rows in parallel, each read
    walked once: written at the prefix sums of their bounds (row_bound), then moved together."""
    m, width = ops.shape[0], ops.shape[1]
    flat_ops, flat_lens = ops.ravel(), lens.ravel()
    start = np.zeros(m + 1, dtype=np.int64)
    for x in prange(m):
        start[x + 1] = row_bound(read_off[sel_read[x] + 1] - read_off[sel_read[x]], flat_ops, flat_lens, x * width,
                                 trace[x, TR_NOPS])
    start = np.cumsum(start)
    scratch = np.empty(start[m], dtype=np.uint8)
    off = np.zeros(m + 1, dtype=np.int64)
    nm = np.empty(m, dtype=np.int64)
    for x in prange(m):
        end, nm_x = md_of_row(x, sel_read[x], sel_key[x], codes, rc_codes, read_off, flat_ops, flat_lens, x * width, 1,
                              trace, g_packed, g_nmask, scratch, start[x], True)
        off[x + 1] = end - start[x]
        nm[x] = nm_x
    off = np.cumsum(off)
    text = np.empty(off[m], dtype=np.uint8)
    for x in prange(m):
        text[off[x]:off[x + 1]] = scratch[start[x]:start[x] + off[x + 1] - off[x]]
    return text, off, nm


@njit(cache=True, nogil=True)
def md_size_bound(n, deleted):
    """At least the MD's bytes of an alignment of a read of n bases with `deleted` deleted reference
    bases: 2 characters an aligned read base, 3 a deleted base (a run of matches writes no more digits
    than its length, or "0"), 1 more."""
    return 2 * n + 3 * deleted + 1


@njit(cache=True, nogil=True)
def row_bound(n, ops, lens, obase, nops):
    """md_size_bound of an alignment of a read of n bases, its deletions counted off its CIGAR."""
    deleted = 0
    for x in range(nops):
        if ops[obase + x] == OP_D:
            deleted += lens[obase + x]
    return md_size_bound(n, deleted)


def md_bound(rows: int, maxlen: int, t: int) -> int:
    """Bytes that the MD strings of `rows` alignments of reads of at most maxlen bases, band t, can
    take (the GPU's buffer, written before its size is known): md_size_bound, the deleted bases being
    within the alignment's window of maxlen + 2t reference bases (its Python function: no compiled
    code to load on the mapping threads)."""
    return max(1, rows * md_size_bound.py_func(maxlen, maxlen + 2 * t))


__all__ = ["MdNm", "md_and_nm", "md_bound", "md_of_row", "md_of_rows", "md_size_bound", "put_decimal", "row_bound"]
