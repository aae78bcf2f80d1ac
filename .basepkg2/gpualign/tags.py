"""FASTQ comments as SAM tags (`gpualign map -C`, as `bwa mem -C`).

bwa appends a read's comment (the header text after the name) to its SAM line as it is, so a
comment must already be SAM tags: TAG:TYPE:VALUE fields separated by tabs (`BC:Z:ACGTACGT`).
gpualign writes BAM itself, so it checks and encodes each field: types Z (text), A (one
character), i (a signed 32-bit integer) and H (hex bytes); other text is a one-line error
naming the record, since a comment that is not tags (Illumina's `1:N:0:ATCACG`) would make an
invalid record.
"""

from .jitcache import use_versioned_cache

use_versioned_cache()  # before any @njit below

import numpy as np
from numba import njit

from .errors import InputError

NOT_TAG, BAD_TYPE, BAD_VALUE = 1, 2, 3
REASONS = {NOT_TAG: "is not a SAM tag field (TAG:TYPE:VALUE, tab-separated, as bwa -C expects)",
           BAD_TYPE: "has a tag type -C does not take (use Z, A, i or H)",
           BAD_VALUE: "has a value that does not fit its tag type"}


@njit(cache=True, nogil=True)
def _is_alpha(c):
    return (65 <= c <= 90) or (97 <= c <= 122)


@njit(cache=True, nogil=True)
def _is_alnum(c):
    return _is_alpha(c) or 48 <= c <= 57


@njit(cache=True, nogil=True)
def field_size(blob, s, e):
    """Bytes of the BAM encoding of the tag field blob[s:e], or -(reason code)."""
    if e - s < 5 or not _is_alpha(blob[s]) or not _is_alnum(blob[s + 1]) or blob[s + 2] != 58 or blob[s + 4] != 58:
        return -NOT_TAG
    t = blob[s + 3]
    v0 = s + 5
    if t == 90:    # Z: printable text, spaces allowed
        for i in range(v0, e):
            if blob[i] < 32 or blob[i] > 126:
                return -BAD_VALUE
        return 3 + (e - v0) + 1
    if t == 65:    # A: one printable character
        if e - v0 != 1 or blob[v0] < 33 or blob[v0] > 126:
            return -BAD_VALUE
        return 4
    if t == 72:    # H: an even number of hex digits
        if (e - v0) % 2:
            return -BAD_VALUE
        for i in range(v0, e):
            c = blob[i]
            if not ((48 <= c <= 57) or (65 <= c <= 70) or (97 <= c <= 102)):
                return -BAD_VALUE
        return 3 + (e - v0) + 1
    if t == 105:   # i: a signed integer that fits 32 bits
        i = v0 + (1 if v0 < e and (blob[v0] == 45 or blob[v0] == 43) else 0)
        if i == e or e - i > 10:
            return -BAD_VALUE
        value = 0
        for x in range(i, e):
            if blob[x] < 48 or blob[x] > 57:
                return -BAD_VALUE
            value = value * 10 + (blob[x] - 48)
        if value > 2147483647 + (1 if blob[v0] == 45 else 0):
            return -BAD_VALUE
        return 3 + 4
    return -BAD_TYPE


@njit(cache=True, nogil=True)
def put_field(blob, s, e, out, o):
    """Write the BAM encoding of the (checked) field blob[s:e] at out[o]; returns the end."""
    out[o] = blob[s]
    out[o + 1] = blob[s + 1]
    t = blob[s + 3]
    out[o + 2] = t
    v0 = s + 5
    o += 3
    if t == 105:
        neg = blob[v0] == 45
        i = v0 + (1 if blob[v0] == 45 or blob[v0] == 43 else 0)
        value = 0
        for x in range(i, e):
            value = value * 10 + (blob[x] - 48)
        if neg:
            value = -value
        u = value & 0xFFFFFFFF
        for b in range(4):
            out[o + b] = (u >> (8 * b)) & 0xFF
        return o + 4
    for x in range(v0, e):
        out[o] = blob[x]
        o += 1
    if t != 65:
        out[o] = 0   # Z and H end with NUL
        o += 1
    return o


@njit(cache=True, nogil=True)
def comment_tags(blob, off):
    """(status, bad read, tags, tag_off): the BAM tag bytes of each read's comment (tab-separated
    fields; an empty comment gives none); status is 0 or the reason code of the first bad read."""
    n = off.shape[0] - 1
    sizes = np.zeros(n + 1, dtype=np.int64)
    for r in range(n):
        s = off[r]
        e = off[r + 1]
        while s < e:
            f = s
            while f < e and blob[f] != 9:
                f += 1
            if f > s:
                size = field_size(blob, s, f)
                if size < 0:
                    return -size, r, np.zeros(0, dtype=np.uint8), sizes
                sizes[r + 1] += size
            s = f + 1
    for r in range(n):
        sizes[r + 1] += sizes[r]
    out = np.empty(sizes[n], dtype=np.uint8)
    for r in range(n):
        s = off[r]
        e = off[r + 1]
        o = sizes[r]
        while s < e:
            f = s
            while f < e and blob[f] != 9:
                f += 1
            if f > s:
                o = put_field(blob, s, f, out, o)
            s = f + 1
    return 0, -1, out, sizes


@njit(cache=True, nogil=True)
def append_tags(buf, offsets, tags, tag_off):
    """BAM records (buf, offsets) with each record's extra tag bytes appended, block_size updated."""
    n = offsets.shape[0] - 1
    out = np.empty(buf.shape[0] + tags.shape[0], dtype=np.uint8)
    new_off = np.zeros(n + 1, dtype=np.int64)
    for r in range(n):
        s = offsets[r]
        size = offsets[r + 1] - s
        extra = tag_off[r + 1] - tag_off[r]
        o = new_off[r]
        out[o:o + size] = buf[s:s + size]
        out[o + size:o + size + extra] = tags[tag_off[r]:tag_off[r + 1]]
        block = size + extra - 4
        for b in range(4):
            out[o + b] = (block >> (8 * b)) & 0xFF
        new_off[r + 1] = o + size + extra
    return out, new_off


def check_comments(batch, describe):
    """Raise the one-line error for the first read of `batch` whose comment is not SAM tags;
    describe(r) names read r ('reads F record N')."""
    status, bad, _, _ = comment_tags(batch.comments, batch.comment_off)
    if status:
        text = batch.comment(bad)[:60].decode(errors="replace")
        raise InputError(f"{describe(bad)}: -C: comment {text!r} {REASONS[status]}")


def comment_fields(batch, r):
    """(tag, value, type) of read r's comment, for pysam records (the comment was checked)."""
    text = batch.comment(r).decode()
    fields = []
    for field in filter(None, text.split("\t")):
        tag, kind, value = field[:2], field[3], field[5:]
        fields.append((tag, int(value) if kind == "i" else value, kind))
    return fields


__all__ = ["comment_tags", "append_tags", "check_comments", "comment_fields"]
