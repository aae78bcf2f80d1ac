"""A batch's records, their fields computed once: encoded as BAM bytes by numba here, or built as
pysam records for SAM text from the same fields (sam_records.py). MD and NM come with the mapping
result (md.py, made by the backend's traceback stage), so both outputs copy the same strings.

- record_fields: per read, what depends on the mate too (flag, position, mate position, TLEN, the
  mate's MAPQ), for both outputs.
- encode_batch: the BAM records of a batch straight into one byte buffer, without a Python object
  per read, in two passes (sizes, then bytes at prefix-summed offsets). Layout follows the SAM
  specification (section 4.2), bins come from bai.reg2bin; integer tags are written as int32
  ('i'), which readers treat alike. Tags: NM MD AS [XS] [MC MQ] [RG] [-C comments].
- batch_bam_records: the encoder the BAM sinks (sort.py) run on their worker threads.

The kernels take a batch as four tuples of arrays (kernel_args builds them), unpacked where used:

    reads = (names, name_off, codes, quals, read_off)            the reads (reads.Reads)
    aln   = (row_of, key, mapq, score, sub, ops, lens, trace)      row_of[read]: its traceback row,
            -1 unmapped; key, mapq, score, sub per read; ops, lens, trace per row (extend.py)
    ref   = (g_packed, g_nmask, c_off)                             the genome
    md    = (text, off, nm)                                        md.MdNm's, rows as the traceback's

encode_record writes a record with small put_* helpers inlined into it (inline='always'): as
separate calls, passing tuples and arrays, they made encoding about 7% slower. encode_batch takes the
tuples apart once a slice and hands the arrays on one by one (put_record: why).
"""

import numpy as np
from numba import njit

from ..encode import CIGAR_CHARS, COMPLEMENT, OP_D, OP_M, OP_S, STRAND_BIT, contig_of
from ..extend import TR_END_ROW, TR_NOPS, TR_READ_START, TR_REF_START
from ..jitcache import use_versioned_cache
from ..md import put_decimal
from ..memmove import MEMMOVE
from ..sam import (FLAG_MATE_REVERSE, FLAG_MATE_UNMAPPED, FLAG_PAIRED, FLAG_PROPER, FLAG_READ1, FLAG_READ2,
                   FLAG_REVERSE, FLAG_UNMAPPED)
from ..tags import append_tags, comment_tags
from .bai import reg2bin
from .optical import name_locations

use_versioned_cache()  # before any @njit below: numba picks the cache folder at decoration

SEQ_NIBBLE = np.array([1, 2, 4, 8, 15], dtype=np.uint8)   # A C G T N in BAM's 4-bit code
RC_NIBBLE = SEQ_NIBBLE[COMPLEMENT]                         # ... of each code's complement
RECORDS_PER_TASK = 1 << 14   # records one encoding task writes: a batch's are spread over threads

# columns of record_fields
F_FLAG, F_RID, F_POS, F_END, F_MRID, F_MPOS, F_TLEN, F_MQ = range(8)
UNMAPPED_KEY = np.iinfo(np.int64).max   # unmapped reads sort last, in input order
# columns of dup_fields; a duplicate-marking end packs (contig << DUP_RID_SHIFT) | ((pos + DUP_POS_BIAS) << 1)
# | reverse, so ends compare as (contig, unclipped 5' position, strand); D_LOC: the read's place on the
# flow cell for optical duplicates (optical.read_location; -1: none or not asked for)
D_END, D_MATE, D_SCORE, D_FIRST, D_FLAGS, D_LOC = range(6)
D_COLS = 6
# D_FLAGS bits
FIRST_IS_MATE = 1   # the fragment's tie record (D_FIRST) is the mate's
IS_READ1 = 2        # the record is read 1 of a pair (optical duplicates go by read 1's strand, then read 2's)
NOT_PRIMARY = 4     # a secondary or supplementary record (never a candidate; counted apart in the metrics)
DUP_RID_SHIFT, DUP_POS_BIAS = 35, 1 << 32


@njit(cache=True, nogil=True)
def put_int(buf, off, value, nbytes, write):
    """Little-endian integer of nbytes at off; returns the offset after it."""
    if write:
        v = np.int64(value) & ((np.int64(1) << (8 * nbytes)) - 1)   # int64: numpy's int32 would overflow (simulator)
        for i in range(nbytes):
            buf[off + i] = (v >> (8 * i)) & 0xFF
    return off + nbytes


@njit(cache=True, nogil=True)
def put_tag_head(buf, off, c1, c2, kind, write):
    """A tag's name (two characters) and type character."""
    if write:
        buf[off] = c1
        buf[off + 1] = c2
        buf[off + 2] = kind
    return off + 3


@njit(cache=True, nogil=True)
def put_int_tag(buf, off, c1, c2, value, write):
    return put_int(buf, put_tag_head(buf, off, c1, c2, 105, write), value, 4, write)   # 'i'


@njit(cache=True, nogil=True)
def record_fields(aln, ref, proper, paired, first, last):
    """Per read of first..last-1 (row r - first): flag, refID, pos, end, mate refID, mate pos, TLEN,
    mate MAPQ (-1: no MQ tag). Paired: first and last even, so both mates of a fragment are in.

    Paired batches interleave mates (read r's mate is r ^ 1). An unmapped read whose mate mapped
    takes the mate's refID and pos (as samtools expects, so it sorts next to it); TLEN runs from
    this read's 5' end to its mate's, as samtools fixmate computes it.
    """
    row_of, key, mapq, _, _, ops, lens, trace = aln
    c_off = ref[2]
    f = np.full((last - first, 8), -1, dtype=np.int64)
    for r in range(first, last):
        row = row_of[r]
        f[r - first, F_FLAG] = FLAG_UNMAPPED
        f[r - first, F_TLEN] = 0
        if row >= 0:
            gstart = trace[row, TR_REF_START]
            rid = contig_of(c_off, gstart)
            span = 0
            for x in range(trace[row, TR_NOPS]):
                if ops[row, x] == OP_M or ops[row, x] == OP_D:
                    span += lens[row, x]
            f[r - first, F_FLAG] = FLAG_REVERSE if key[r] >= STRAND_BIT else 0
            f[r - first, F_RID] = rid
            f[r - first, F_POS] = gstart - c_off[rid]
            f[r - first, F_END] = gstart - c_off[rid] + span
    if not paired:
        return f
    for r in range(first, last):
        m = r ^ 1
        mine = row_of[r] >= 0
        mates = row_of[m] >= 0
        flag = f[r - first, F_FLAG] | FLAG_PAIRED | (FLAG_READ1 if r % 2 == 0 else FLAG_READ2)
        if not mates:
            flag |= FLAG_MATE_UNMAPPED
        elif f[m - first, F_FLAG] & FLAG_REVERSE:
            flag |= FLAG_MATE_REVERSE
        if mine and mates and proper[r]:
            flag |= FLAG_PROPER
        f[r - first, F_FLAG] = flag
    for r in range(first, last):
        m = r ^ 1
        mine = row_of[r] >= 0
        mates = row_of[m] >= 0
        if mates:
            f[r - first, F_MRID] = f[m - first, F_RID]
            f[r - first, F_MPOS] = f[m - first, F_POS]
            f[r - first, F_MQ] = mapq[m]
            if not mine:   # placed at its mate
                f[r - first, F_RID] = f[m - first, F_RID]
                f[r - first, F_POS] = f[m - first, F_POS]
        elif mine:
            f[r - first, F_MRID] = f[r - first, F_RID]
            f[r - first, F_MPOS] = f[r - first, F_POS]
        if mine and mates and f[r - first, F_RID] == f[m - first, F_RID]:
            five = f[r - first, F_END] if f[r - first, F_FLAG] & FLAG_REVERSE else f[r - first, F_POS]
            mate_five = f[m - first, F_END] if f[m - first, F_FLAG] & FLAG_REVERSE else f[m - first, F_POS]
            f[r - first, F_TLEN] = mate_five - five
    return f


@njit(cache=True, nogil=True)
def read_alone(r, row, key, trace, ops, lens, c_off):
    """Read r's own flag (reverse, or unmapped), refID, position and end (row: its traceback row, -1
    unmapped; its CIGAR at ops/lens[x, row], as put_cigar reads it)."""
    if row < 0:
        return FLAG_UNMAPPED, -1, -1, -1
    gstart = trace[row, TR_REF_START]
    rid = contig_of(c_off, gstart)
    span = 0
    for x in range(trace[row, TR_NOPS]):
        if ops[x, row] == OP_M or ops[x, row] == OP_D:
            span += lens[x, row]
    pos = gstart - c_off[rid]
    return (FLAG_REVERSE if key[r] >= STRAND_BIT else 0), rid, pos, pos + span


@njit(cache=True, nogil=True)
def read_fields(r, row, mate_row, key, mapq, proper, paired, trace, ops, lens, c_off):
    """record_fields' row of read r as a tuple, from the read (traceback row `row`) and, paired, its
    mate r ^ 1 (mate_row) alone: how the GPU's record kernel makes them, a thread a read. (record_fields
    does not call it: a call a read, its arrays reference-counted, took 130-220 ns a record against
    its own loops' 7-12 on the 2-core machine; a test holds the two to the same fields.)"""
    flag, rid, pos, end = read_alone(r, row, key, trace, ops, lens, c_off)
    if not paired:
        return flag, rid, pos, end, -1, -1, 0, -1
    m = r ^ 1
    mflag, m_rid, m_pos, m_end = read_alone(m, mate_row, key, trace, ops, lens, c_off)
    mine, mates = row >= 0, mate_row >= 0
    flag |= FLAG_PAIRED | (FLAG_READ1 if r % 2 == 0 else FLAG_READ2)
    if not mates:
        flag |= FLAG_MATE_UNMAPPED
    elif mflag & FLAG_REVERSE:
        flag |= FLAG_MATE_REVERSE
    if mine and mates and proper[r]:
        flag |= FLAG_PROPER
    mrid, mpos, tlen, mq = -1, -1, 0, -1
    if mates:
        mrid, mpos, mq = m_rid, m_pos, mapq[m]
        if not mine:   # placed at its mate
            rid, pos = m_rid, m_pos
    elif mine:
        mrid, mpos = rid, pos
    if mine and mates and rid == m_rid:
        five = end if flag & FLAG_REVERSE else pos
        mate_five = m_end if mflag & FLAG_REVERSE else m_pos
        tlen = mate_five - five
    return flag, rid, pos, end, mrid, mpos, tlen, mq


@njit(cache=True, nogil=True, inline='always')
def sort_key(flag, rid, pos):
    """A record's coordinate sort key: contig, position, then forward before reverse strand (as
    samtools); unmapped reads with no mapped mate last (UNMAPPED_KEY), in input order."""
    if rid < 0:
        return UNMAPPED_KEY
    return (rid << 33) | (pos << 1) | (1 if flag & FLAG_REVERSE else 0)


@njit(cache=True, nogil=True, inline='always')
def key_place(key):
    """The (refID, pos) a sort key was made from: (-1, -1) for UNMAPPED_KEY, which has none."""
    if key == UNMAPPED_KEY:
        return -1, -1
    return key >> 33, (key >> 1) & 0xFFFFFFFF


@njit(cache=True, nogil=True, inline='always')
def put_cigar_op(buf, off, op, ln, text, write):
    """One CIGAR operation: binary (length << 4 | op) or as text ('12M')."""
    if not text:
        return put_int(buf, off, (ln << 4) | op, 4, write)
    off = put_decimal(buf, off, ln, write)
    if write:
        buf[off] = CIGAR_CHARS[op]
    return off + 1


@njit(cache=True, nogil=True, inline='always')
def put_cigar(buf, off, ops, lens, trace, row, n, text, write):
    """The CIGAR of a traceback row (read length n), soft clips included: binary (the record's
    own) or as text (the MC tag). Operation x of the row at ops/lens[x, row]: the host's
    [rows, width] arrays transposed, or the GPU's layout as it is."""
    qs = trace[row, TR_READ_START]
    qe = trace[row, TR_END_ROW]
    if qs > 0:
        off = put_cigar_op(buf, off, OP_S, qs, text, write)
    for x in range(trace[row, TR_NOPS]):
        off = put_cigar_op(buf, off, ops[x, row], lens[x, row], text, write)
    if qe < n:
        off = put_cigar_op(buf, off, OP_S, n - qe, text, write)
    return off


@njit(cache=True, nogil=True)
def copy_bytes(memmove, dst, doff, src, soff, n):
    """dst[doff:doff + n] = src[soff:soff + n] through libc's memmove (numba's slice copy walks the
    bytes); on the GPU (cuda_kernels' device functions) a loop of its own stands in."""
    memmove(dst.ctypes.data + doff, src.ctypes.data + soff, n)


def copy_bytes_loop(memmove, dst, doff, src, soff, n):
    """copy_bytes on the GPU, where there is no memmove (memmove: unused)."""
    for i in range(n):
        dst[doff + i] = src[soff + i]


@njit(cache=True, nogil=True, inline='always')
def put_seq_qual(buf, off, codes, qoff, quals, n, reverse, write, memmove):
    """SEQ (two bases a byte) and QUAL of a read (codes and qualities from qoff) in reference
    orientation: a reverse read's reverse complement is packed straight from its codes (the reader
    keeps none; written apart first, it took a third of encoding a reverse record)."""
    if write:
        nibble, at, step = (RC_NIBBLE, qoff + n - 1, -1) if reverse else (SEQ_NIBBLE, qoff, 1)
        for i in range(n // 2):
            buf[off + i] = (nibble[codes[at + 2 * i * step]] << 4) | nibble[codes[at + (2 * i + 1) * step]]
        if n & 1:
            buf[off + n // 2] = nibble[codes[at + (n - 1) * step]] << 4
    off += (n + 1) // 2
    if write:
        if reverse:
            for i in range(n):
                buf[off + i] = quals[qoff + n - 1 - i]
        else:
            copy_bytes(memmove, buf, off, quals, qoff, n)
    return off + n


@njit(cache=True, nogil=True, inline='always')
def put_alignment_tags(buf, off, r, row, score, sub, text, md_off, nm, write, memmove):
    """NM, MD, AS and XS (when there is a second best score) of mapped read r, traceback row `row`."""
    off = put_int_tag(buf, off, 78, 77, nm[row], write)                 # NM
    off = put_tag_head(buf, off, 77, 68, 90, write)                      # MD:Z
    size = md_off[row + 1] - md_off[row]
    if write:
        copy_bytes(memmove, buf, off, text, md_off[row], size)
        buf[off + size] = 0
    off = put_int_tag(buf, off + size + 1, 65, 83, score[r], write)     # AS
    if sub[r] >= 0:
        off = put_int_tag(buf, off, 88, 83, sub[r], write)               # XS
    return off


@njit(cache=True, nogil=True, inline='always')
def put_mate_tags(buf, off, mate_row, mate_len, ops, lens, trace, mq, write):
    """MC (the CIGAR of the mapped mate, traceback row mate_row, read length mate_len) and MQ (its
    MAPQ, mq)."""
    off = put_tag_head(buf, off, 77, 67, 90, write)                      # MC:Z
    off = put_cigar(buf, off, ops, lens, trace, mate_row, mate_len, True, write)
    if write:
        buf[off] = 0
    return put_int_tag(buf, off + 1, 77, 81, mq, write)                  # MQ


@njit(cache=True, nogil=True)
def encode_record(r, reads, aln, md, rg, fields, buf, off, write, memmove):
    """The BAM record of read r at off (fields: its record_fields row; rg: the read group ID's
    bytes, empty for none; memmove: memmove.MEMMOVE, which copies the name, qualities and MD).
    Returns the offset after it; with write False only measures. (put_record with the tuples
    unpacked; encode_batch unpacks them once a slice.)"""
    names, name_off, codes, quals, read_off = reads
    row_of, key, mapq, score, sub, ops, lens, trace = aln
    text, md_off, nm = md
    mate_row = row_of[r ^ 1] if fields[F_FLAG] & FLAG_PAIRED else -1
    return put_record(r, row_of[r], names, name_off, codes, quals, read_off, mapq, score, sub, ops.T, lens.T, trace,
                      text, md_off, nm, rg, (fields[F_FLAG], fields[F_RID], fields[F_POS], fields[F_END], fields[F_MRID],
                                             fields[F_MPOS], fields[F_TLEN], fields[F_MQ]), mate_row, buf, off, write,
                      memmove)


# put_record and bound_of take the arrays one by one, not as the tuples above: each array taken out of a
# tuple is a reference counted in and out (a call through a pointer and an atomic add on a counter that
# every encoding thread shares). Unpacked once a slice, a 100 bp record took 370 ns against 490 on the
# 2-core machine (200,000 E. coli reads, the same bytes). Inlining the put_int helpers too, or calling the
# put_* helpers instead of inlining them, was slower (380-440 ns): numba counts an inlined function's
# array arguments in and out as well. The same function writes the GPU's records (cuda_kernels'
# device functions, copy_bytes a loop there), so both backends' bytes come from one text.
@njit(cache=True, nogil=True, inline='always')
def put_record(r, row, names, name_off, codes, quals, read_off, mapq, score, sub, ops, lens, trace, text, md_off, nm,
               rg, fields, mate_row, buf, off, write, memmove):
    """The BAM record of read r (traceback row `row`, -1 unmapped) at off; returns the offset after it,
    and with write False only measures. fields: its record_fields row as a tuple (read_fields');
    its CIGAR at ops/lens[x, row] (put_cigar); mate_row: the mapped mate's traceback row (-1: none,
    or single-end); rg: the read group ID's bytes. (At most 30 arguments: Python passes more as
    *args, which numba cannot inline.)"""
    flag, rid, pos, end, mrid, mpos, tlen, mq = fields
    start = off
    n = read_off[r + 1] - read_off[r]
    lname = name_off[r + 1] - name_off[r]
    ncig = 0   # CIGAR operations, soft clips included
    if row >= 0:
        ncig = trace[row, TR_NOPS] + (1 if trace[row, TR_READ_START] > 0 else 0) \
            + (1 if trace[row, TR_END_ROW] < n else 0)
    off += 4                                   # block_size, filled below
    off = put_int(buf, off, rid, 4, write)
    off = put_int(buf, off, pos, 4, write)     # an unmapped read sits at its mate's position when the mate mapped
    off = put_int(buf, off, lname + 1, 1, write)
    off = put_int(buf, off, mapq[r] if row >= 0 else 0, 1, write)
    off = put_int(buf, off, reg2bin(pos, max(end, pos + 1)) if pos >= 0 else reg2bin(-1, 0), 2, write)
    off = put_int(buf, off, ncig, 2, write)
    off = put_int(buf, off, flag, 2, write)
    off = put_int(buf, off, n, 4, write)
    off = put_int(buf, off, mrid, 4, write)    # next refID
    off = put_int(buf, off, mpos, 4, write)    # next pos
    off = put_int(buf, off, tlen, 4, write)
    if write:
        copy_bytes(memmove, buf, off, names, name_off[r], lname)
        buf[off + lname] = 0
    off += lname + 1
    reverse = flag & FLAG_REVERSE != 0   # set for mapped reads on the reverse strand only
    if row >= 0:
        off = put_cigar(buf, off, ops, lens, trace, row, n, False, write)
    off = put_seq_qual(buf, off, codes, read_off[r], quals, n, reverse, write, memmove)
    if row >= 0:
        off = put_alignment_tags(buf, off, r, row, score, sub, text, md_off, nm, write, memmove)
    if flag & FLAG_PAIRED and mate_row >= 0:
        m = r ^ 1
        off = put_mate_tags(buf, off, mate_row, read_off[m + 1] - read_off[m], ops, lens, trace, mq, write)
    if rg.shape[0] > 0:
        off = put_tag_head(buf, off, 82, 71, 90, write)                  # RG:Z
        if write:
            for i in range(rg.shape[0]):
                buf[off + i] = rg[i]
            buf[off + rg.shape[0]] = 0
        off += rg.shape[0] + 1
    put_int(buf, start, off - start - 4, 4, write)
    return off


@njit(cache=True, nogil=True)
def record_bound(r, reads, aln, md, rg, paired):
    """At least the bytes encode_record writes for read r, from lengths alone: a text CIGAR operation
    takes at most 6 (lengths < 10**5)."""
    return bound_of(r, reads[1], reads[4], aln[0], aln[7], md[1], rg.shape[0], paired)


@njit(cache=True, nogil=True, inline='always')
def bound_of(r, name_off, read_off, row_of, trace, md_off, rg_len, paired):
    """record_bound with its tuples unpacked."""
    n = read_off[r + 1] - read_off[r]
    size = 36 + name_off[r + 1] - name_off[r] + 1 + (n + 1) // 2 + n + 4 + rg_len + 1
    row = row_of[r]
    if row >= 0:   # CIGAR NM MD AS XS
        size += 4 * (trace[row, TR_NOPS] + 2) + 7 + 4 + md_off[row + 1] - md_off[row] + 1 + 7 + 7
    m = r ^ 1
    if paired and m < row_of.shape[0] and row_of[m] >= 0:
        size += 4 + 6 * (trace[row_of[m], TR_NOPS] + 2) + 1 + 7                            # MC MQ
    return size


@njit(cache=True, nogil=True)
def encode_batch(reads, aln, ref, md, rg, proper, paired, first, last, memmove, dup):
    """The records of reads first..last-1 of a batch, in read order: (bytes, record offsets, coordinate
    sort keys, duplicate-marking fields (dup_fields; no rows unless dup)). Paired: first and last even.

    Serial and GIL-free: slices of batches are encoded side by side on threads while the next batch
    maps. A sort key orders by contig, position, then forward before reverse strand (as samtools).
    """
    fields = record_fields(aln, ref, proper, paired, first, last)
    n = fields.shape[0]
    names, name_off, codes, quals, read_off = reads
    row_of, key, mapq, score, sub, ops, lens, trace = aln
    text, md_off, nm = md
    bound = 0
    for r in range(first, last):
        bound += bound_of(r, name_off, read_off, row_of, trace, md_off, rg.shape[0], paired)
    buf = np.empty(bound, dtype=np.uint8)   # written once, front to back: untouched pages cost nothing
    offsets = np.zeros(n + 1, dtype=np.int64)
    keys = np.empty(n, dtype=np.int64)
    ops_t, lens_t = ops.T, lens.T
    for r in range(n):
        g = first + r
        f = fields[r]
        offsets[r + 1] = put_record(g, row_of[g], names, name_off, codes, quals, read_off, mapq, score, sub, ops_t,
                                    lens_t, trace, text, md_off, nm, rg, (f[F_FLAG], f[F_RID], f[F_POS], f[F_END],
                                                                          f[F_MRID], f[F_MPOS], f[F_TLEN], f[F_MQ]),
                                    row_of[g ^ 1] if f[F_FLAG] & FLAG_PAIRED else -1, buf, offsets[r], True, memmove)
        keys[r] = sort_key(f[F_FLAG], f[F_RID], f[F_POS])
    dupf = dup_fields(reads, aln, fields, keys, paired, first, last) if dup else np.empty((0, D_COLS), np.int64)
    return buf[:offsets[n]], offsets, keys, dupf


@njit(cache=True, nogil=True, inline='always')
def five_prime_end(aln, row, n, rid, pos, end, reverse):
    """A mapped read's unclipped 5' end, packed as a duplicate-marking end (markdup.py): contig,
    position (its unclipped start, or on the reverse strand its unclipped end: the last base's
    position, 0-based, plus the soft clip after it), strand."""
    trace = aln[7]
    if reverse:
        five = end - 1 + (n - trace[row, TR_END_ROW])
    else:
        five = pos - trace[row, TR_READ_START]
    return (rid << DUP_RID_SHIFT) | ((five + DUP_POS_BIAS) << 1) | (1 if reverse else 0)


@njit(cache=True, nogil=True)
def dup_fields(reads, aln, fields, keys, paired, first, last):
    """What duplicate marking (markdup.py) needs of reads first..last-1, one row each (columns D_*):
    the read's unclipped 5' end (-1: not a candidate: unmapped), its mate's (-1: single-end or mate
    unmapped), the score (the read's base qualities of 15 and over summed, capped at 16383 as Picard,
    plus its mapped mate's), the sort key of the fragment's tie record and whether that record is the
    mate (FIRST_IS_MATE): the tie-break of equal scores after the flow-cell place (D_LOC, filled by
    batch_bam_records). The tie record is Picard's read 1 end: a single read itself; of a pair, the
    mate whose unclipped 5' end is lower (contig, position), the one written first where they are
    equal. gpualign writes no secondary or supplementary records: every mapped record is primary."""
    quals, read_off = reads[3], reads[4]
    row_of = aln[0]
    n = last - first
    out = np.full((n, D_COLS), -1, dtype=np.int64)
    score = np.zeros(n, dtype=np.int64)
    for i in range(n):
        r = first + i
        s = 0
        for j in range(read_off[r], read_off[r + 1]):
            if quals[j] >= 15:
                s += quals[j]
        score[i] = min(s, 16383)
        if row_of[r] >= 0:
            out[i, D_END] = five_prime_end(aln, row_of[r], read_off[r + 1] - read_off[r], fields[i, F_RID],
                                           fields[i, F_POS], fields[i, F_END], fields[i, F_FLAG] & FLAG_REVERSE != 0)
    for i in range(n):
        out[i, D_SCORE] = score[i]
        out[i, D_FIRST] = keys[i]
        out[i, D_FLAGS] = IS_READ1 if fields[i, F_FLAG] & FLAG_READ1 else 0
        m = (first + i) ^ 1
        if paired and out[i, D_END] >= 0 and row_of[m] >= 0:
            mi = m - first
            out[i, D_MATE] = out[mi, D_END]
            out[i, D_SCORE] = score[i] + score[mi]
            mine, its = out[i, D_END] >> 1, out[mi, D_END] >> 1   # (contig, unclipped 5' position)
            written_first = keys[mi] < keys[i] or (keys[mi] == keys[i] and mi < i)
            if its < mine or (its == mine and written_first):   # the mate is Picard's read 1
                out[i, D_FIRST] = keys[mi]
                out[i, D_FLAGS] |= FIRST_IS_MATE
    return out


def kernel_args(batch, res, genome):
    """A batch and its mapping result as the kernels take them: (reads, aln, ref, md, proper, paired)."""
    row_of = np.full(len(batch), -1, dtype=np.int64)
    row_of[res.mapped] = np.arange(len(res.mapped))
    reads = (batch.names, batch.name_off, batch.codes, batch.quals, batch.read_off)
    aln = (row_of, res.key, res.mapq, res.score, res.sub, np.ascontiguousarray(res.ops),
           np.ascontiguousarray(res.lens), res.trace)
    paired = res.proper is not None
    return (reads, aln, (genome.packed, genome.nmask, genome.offsets), tuple(res.md),
            res.proper if paired else row_of, paired)


def record_slices(n: int):
    """(first, last) of the slices a batch's records are encoded in, each on a thread of its own
    (RECORDS_PER_TASK is even: a slice of a paired batch holds both mates of its fragments)."""
    return [(a, min(n, a + RECORDS_PER_TASK)) for a in range(0, n, RECORDS_PER_TASK)]


def batch_bam_records(batch, res, genome, rg_id, first=0, last=None, dup=False):
    """The BAM records of reads first..last-1 of a batch (all by default), in input order: (bytes,
    record offsets, coordinate sort keys), and with dup their duplicate-marking fields (dup_fields,
    and the reads' flow-cell places from their names: a tie-break, and optical duplicates')."""
    last = len(batch) if last is None else last
    rg = np.frombuffer((rg_id or "").encode(), dtype=np.uint8)
    if res.records is not None:   # made by the backend (the GPU's, records_on_device), with this rg
        buf, offsets, keys = res.records
        buf, offsets, keys = buf[offsets[first]:offsets[last]], offsets[first:last + 1] - offsets[first], keys[first:last]
        dupf = None
        if dup:
            reads, aln, ref, _, proper, paired = kernel_args(batch, res, genome)
            dupf = dup_fields(reads, aln, record_fields(aln, ref, proper, paired, first, last), keys, paired, first,
                              last)
    else:
        reads, aln, ref, md, proper, paired = kernel_args(batch, res, genome)
        buf, offsets, keys, dupf = encode_batch(reads, aln, ref, md, rg, proper, paired, first, last, MEMMOVE, dup)
    if dup:
        dupf[:, D_LOC] = name_locations(batch.names, batch.name_off, first, last)
    if batch.has_comments:   # read with -C: the comments' tags end each record
        _, _, tags, tag_off = comment_tags(batch.comments[batch.comment_off[first]:batch.comment_off[last]],
                                           batch.comment_off[first:last + 1] - batch.comment_off[first])
        buf, offsets = append_tags(buf, offsets, tags, tag_off)
    return (buf, offsets, keys, dupf) if dup else (buf, offsets, keys)
