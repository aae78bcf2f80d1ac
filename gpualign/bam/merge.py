"""Coordinate-sorted BAMs merged into one sorted, indexed BAM, duplicates marked on the way out: the
workflow's merge of a unit's chunks and of a sample's units (workflow/chunks.merge_sorted_bams).

Each input is a sorted run, so the merge is SortedBam's final pass (sort.write_runs) over them:
1. every input's BGZF blocks are inflated on all threads into one spool file beside the output (a
   Python call a block, which ISA-L runs without the GIL), as the sort's run file is;
2. numba walks each input's records there (start, size, sort key: contig, position + 1, strand;
   unmapped reads without a contig last), checking that the input is sorted;
3. with markdup, numba reads what duplicate marking needs from the records themselves, in
   parallel (flag, unclipped 5' end from POS and CIGAR, base qualities, read group, the name's
   hash and its flow-cell place), joins mates by name within the read group (a hash table, one pass),
   and markdup.decide picks the duplicates over all inputs at once: a library's duplicates are found
   across its units and chunks (libraries: the read groups' LB);
4. write_runs merges the runs part by part (ties in input order, as samtools merge), sets or clears
   0x400 in each gathered record, compresses and indexes them.

No second pass over the output, no per-record Python, no sidecar files: the inputs are read once,
and any coordinate-sorted BAM can be merged and marked. A tie of sort keys goes to the earlier
input, so chunks merged in input order give the unsplit run's records in its order, and the
duplicate ties (Picard's: the lowest flow-cell place, then the tie record written first) fall as in
that run.
"""

import contextlib
import os
import shutil
import struct
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pysam
from numba import njit, prange

from .. import trace
from ..errors import InputError
from ..jitcache import use_versioned_cache
from ..threads import ordered_map
from .markdup import UNKNOWN_LIBRARY, decide, library_metrics, write_metrics
from .optical import read_location
from .records import (D_COLS, D_END, D_FIRST, D_FLAGS, D_LOC, D_MATE, D_SCORE, DUP_POS_BIAS, DUP_RID_SHIFT,
                      FIRST_IS_MATE, IS_READ1, NOT_PRIMARY, UNMAPPED_KEY)
from .sort import write_bai, write_runs

try:
    from isal import isal_zlib as inflater   # about twice zlib's speed
except ImportError:  # pragma: no cover
    import zlib as inflater

use_versioned_cache()  # before any @njit below

BLOCKS_PER_TASK = 64   # BGZF blocks one inflating task takes (4 MiB of records)
CIGAR_REF = np.array([1, 0, 1, 1, 0, 0, 0, 1, 1], dtype=np.int64)   # MIDNSHP=X: which consume the reference
FNV_OFFSET, FNV_PRIME = np.uint64(0xcbf29ce484222325), np.uint64(0x100000001b3)


# ---- the inputs' BGZF blocks and records ------------------------------------------------------------


@njit(cache=True, nogil=True)
def bgzf_blocks(buf):
    """Each BGZF block of a file's bytes: (start, compressed data start, its length, inflated size).
    A block that is not BGZF (or is cut short) ends the table early: bad[0] is its offset, else -1."""
    n = buf.shape[0]
    cap = n // 28 + 1
    out = np.empty((cap, 4), dtype=np.int64)
    bad = np.full(1, -1, dtype=np.int64)
    o = k = 0
    while o < n:
        if (o + 18 > n or buf[o] != 31 or buf[o + 1] != 139 or buf[o + 2] != 8 or not buf[o + 3] & 4):
            bad[0] = o
            break
        xlen = buf[o + 10] | (np.int64(buf[o + 11]) << 8)
        bsize = -1
        x = o + 12
        while x + 4 <= o + 12 + xlen:   # the extra subfields: BC holds the block's size - 1
            slen = buf[x + 2] | (np.int64(buf[x + 3]) << 8)
            if buf[x] == 66 and buf[x + 1] == 67 and slen == 2:
                bsize = (buf[x + 4] | (np.int64(buf[x + 5]) << 8)) + 1
            x += 4 + slen
        if bsize < 0 or o + bsize > n:
            bad[0] = o
            break
        e = o + bsize
        isize = (buf[e - 4] | (np.int64(buf[e - 3]) << 8) | (np.int64(buf[e - 2]) << 16)
                 | (np.int64(buf[e - 1]) << 24))
        out[k, 0], out[k, 1], out[k, 2], out[k, 3] = o, o + 12 + xlen, bsize - 20 - xlen, isize
        k += 1
        o = e
    return out[:k], bad


def inflate_blocks(raw, blocks, path):
    """The inflated bytes of some BGZF blocks (rows of bgzf_blocks), their CRCs checked."""
    out = bytearray(int(blocks[:, 3].sum()))
    view = memoryview(out)
    at = 0
    for _, cstart, clen, usize in blocks:
        data = inflater.decompress(raw[cstart:cstart + clen], wbits=-15)
        crc = int(raw[cstart + clen:cstart + clen + 4].view("<u4")[0])
        if len(data) != usize or inflater.crc32(data) != crc:
            raise InputError(f"BAM {path}: corrupt BGZF block at byte {cstart - 18}")
        view[at:at + usize] = data
        at += usize
    return out


def spool_input(path, fh, pool, threads):
    """Inflate a BAM into the open spool file fh on the pool; returns the bytes written."""
    if os.path.getsize(path) == 0:
        raise InputError(f"BAM {path}: empty file")
    raw = np.memmap(path, dtype=np.uint8, mode="r")
    blocks, bad = bgzf_blocks(raw)
    if bad[0] >= 0:
        raise InputError(f"BAM {path}: not BGZF (or truncated) at byte {bad[0]}")
    tasks = [blocks[i:i + BLOCKS_PER_TASK] for i in range(0, len(blocks), BLOCKS_PER_TASK)]
    written = 0
    for data in ordered_map(pool, lambda b: inflate_blocks(raw, b, path), tasks, 2 * threads):
        fh.write(data)
        written += len(data)
    return written


def parse_header(src, at, end, path):
    """(header text, reference names and lengths, offset of the first record) of a BAM's bytes."""
    mv = memoryview(src[at:min(end, at + (1 << 31))])
    try:
        if bytes(mv[:4]) != b"BAM\x01":
            raise ValueError("no BAM magic")
        l_text = struct.unpack_from("<i", mv, 4)[0]
        text = bytes(mv[8:8 + l_text]).split(b"\0", 1)[0].decode()
        o = 8 + l_text
        n_ref = struct.unpack_from("<i", mv, o)[0]
        o += 4
        refs = []
        for _ in range(n_ref):
            l_name = struct.unpack_from("<i", mv, o)[0]
            name = bytes(mv[o + 4:o + 4 + l_name - 1]).decode()
            refs.append((name, struct.unpack_from("<i", mv, o + 4 + l_name)[0]))
            o += 8 + l_name
    except (ValueError, struct.error, UnicodeDecodeError) as exc:
        raise InputError(f"BAM {path}: bad header ({exc})") from None
    return text, refs, at + o


@njit(cache=True, nogil=True)
def le32(src, o):
    return np.int32(np.uint32(src[o]) | (np.uint32(src[o + 1]) << 8) | (np.uint32(src[o + 2]) << 16)
                    | (np.uint32(src[o + 3]) << 24))


@njit(cache=True, nogil=True)
def le16(src, o):
    return np.int64(src[o]) | (np.int64(src[o + 1]) << 8)


@njit(cache=True, nogil=True)
def record_count(src, at, end):
    """Records from at to end, or -(the bad record's number + 1) where one is malformed (its fields
    do not fit its size) or runs past end."""
    n = 0
    while at < end:
        size = np.int64(le32(src, at)) + 4 if at + 4 <= end else 0
        if size < 36 or at + size > end:
            return -(n + 1)
        l_name, n_cigar, l_seq = np.int64(src[at + 12]), le16(src, at + 16), np.int64(le32(src, at + 20))
        if l_name < 1 or l_seq < 0 or 36 + l_name + 4 * n_cigar + (l_seq + 1) // 2 + l_seq > size:
            return -(n + 1)
        at += size
        n += 1
    return n


@njit(cache=True, nogil=True)
def record_table(src, at, n):
    """Start, size and sort key of the n records from at, and the first record out of order (-1: none)."""
    starts = np.empty(n, dtype=np.int64)
    sizes = np.empty(n, dtype=np.int32)
    keys = np.empty(n, dtype=np.int64)
    unsorted = -1
    for i in range(n):
        size = le32(src, at) + 4
        rid, pos = np.int64(le32(src, at + 4)), np.int64(le32(src, at + 8))
        rev = (le16(src, at + 18) >> 4) & 1
        keys[i] = (rid << 33) | ((pos + 1) << 1) | rev if rid >= 0 else UNMAPPED_KEY
        starts[i], sizes[i] = at, size
        if unsorted < 0 and i > 0 and keys[i] < keys[i - 1]:
            unsorted = i
        at += size
    return starts, sizes, keys, unsorted


# ---- what duplicate marking needs, read from the records --------------------------------------------


@njit(cache=True, nogil=True)
def tag_value(src, o, end, c1, c2):
    """Where the value of the Z tag c1c2 starts among the tags from o to end, or -1."""
    while o + 3 <= end:
        t = src[o + 2]
        v = o + 3
        if src[o] == c1 and src[o + 1] == c2 and t == 90:   # 'Z'
            return v
        if t == 90 or t == 72:               # Z, H: up to a NUL
            while v < end and src[v] != 0:
                v += 1
            o = v + 1
        elif t == 66:                        # B: subtype, count, values
            sub = src[v]
            width = 1 if sub in (99, 67) else 2 if sub in (115, 83) else 4
            o = v + 5 + width * np.int64(le32(src, v + 1))
        else:
            o = v + (1 if t in (65, 99, 67) else 2 if t in (115, 83) else 4)
    return -1


@njit(cache=True, nogil=True)
def read_group_number(src, v, end, rg_names, rg_off):
    """The number of the read group whose ID is the NUL-ended string at src[v], or -1."""
    for g in range(rg_off.shape[0] - 1):
        a, b = rg_off[g], rg_off[g + 1]
        if v + (b - a) < end and src[v + b - a] == 0:
            same = True
            for x in range(b - a):
                if src[v + x] != rg_names[a + x]:
                    same = False
                    break
            if same:
                return g
    return -1


@njit(cache=True, nogil=True, parallel=True)
def record_dup_fields(src, starts, rg_names, rg_off):
    """Per record: its dup_fields row, filled as far as the record alone says (D_END, the read's own
    score in D_SCORE, D_FLAGS, D_LOC), its read group number (-1: none) and its name's hash; pairs
    are joined after (join_mates)."""
    n = starts.shape[0]
    d = np.full((n, D_COLS), -1, dtype=np.int64)
    rg = np.full(n, -1, dtype=np.int64)
    name_hash = np.zeros(n, dtype=np.uint64)
    for i in prange(n):
        o = starts[i]
        end = o + 4 + np.int64(le32(src, o))
        rid, pos = np.int64(le32(src, o + 4)), np.int64(le32(src, o + 8))
        l_name, n_cigar, flag = np.int64(src[o + 12]), le16(src, o + 16), le16(src, o + 18)
        l_seq = np.int64(le32(src, o + 20))
        cig = o + 36 + l_name
        qual = cig + 4 * n_cigar + (l_seq + 1) // 2
        h = FNV_OFFSET
        for x in range(o + 36, o + 35 + l_name):
            h = (h ^ np.uint64(src[x])) * FNV_PRIME
        name_hash[i] = h
        v = tag_value(src, qual + l_seq, end, 82, 71)   # RG
        if v >= 0:
            rg[i] = read_group_number(src, v, end, rg_names, rg_off)
        flags = IS_READ1 if flag & 0x40 else 0
        if flag & 0x900:
            flags |= NOT_PRIMARY
        d[i, D_FLAGS] = flags
        if flag & 0x4 or flag & 0x900 or rid < 0:
            continue
        s = 0
        if l_seq > 0 and src[qual] != 255:   # 0xFF: no qualities
            for x in range(qual, qual + l_seq):
                if src[x] >= 15:
                    s += src[x]
        d[i, D_SCORE] = min(s, 16383)
        reverse = (flag >> 4) & 1
        lead = trail = span = 0   # clips (S, H) before and after the aligned part, reference bases
        seen = False
        for c in range(n_cigar):
            word = np.uint32(le32(src, cig + 4 * c))
            op, ln = np.int64(word & 15), np.int64(word >> 4)
            if op == 4 or op == 5:
                if seen:
                    trail += ln
                else:
                    lead += ln
            else:
                seen = True
                if op < 9:
                    span += CIGAR_REF[op] * ln
        five = pos + span - 1 + trail if reverse else pos - lead
        d[i, D_END] = (rid << DUP_RID_SHIFT) | ((five + DUP_POS_BIAS) << 1) | reverse
        d[i, D_LOC] = read_location(src, o + 36, o + 35 + l_name)
    return d, rg, name_hash


@njit(cache=True, nogil=True)
def same_name(src, a, b):
    la = src[a + 12]
    if la != src[b + 12]:
        return False
    for x in range(la):
        if src[a + 36 + x] != src[b + 36 + x]:
            return False
    return True


@njit(cache=True, nogil=True)
def join_mates(src, starts, name_hash, rg, pairable):
    """Each pairable record's mate (its row; -1 where none is found): the other pairable record of
    the same name in the same read group. One pass over an open-addressing table of name hashes."""
    n = starts.shape[0]
    mate = np.full(n, -1, dtype=np.int64)
    count = 0
    for i in range(n):
        count += pairable[i]
    size = 1
    while size < 2 * count + 2:
        size <<= 1
    mask = np.uint64(size - 1)
    table = np.full(size, -1, dtype=np.int64)
    for i in range(n):
        if not pairable[i]:
            continue
        s = np.int64(name_hash[i] & mask)
        while table[s] >= 0:
            o = table[s]
            if (mate[o] < 0 and name_hash[o] == name_hash[i] and rg[o] == rg[i]
                    and same_name(src, starts[o], starts[i])):
                mate[o], mate[i] = i, o
                break
            s = (s + 1) & (size - 1)
        if mate[i] < 0:
            table[s] = i
    return mate


def dup_rows(src, starts, keys, flags, read_groups):
    """dup_fields rows of merged records (in the runs' concatenated order, which is the output's
    on ties), their read group numbers, their mates' rows (a record's own where it has none) and
    how many records whose mate is mapped found no mate."""
    names = [g.encode() for g in read_groups]
    rg_off = np.cumsum([0] + [len(g) for g in names], dtype=np.int64)
    rg_names = np.frombuffer(b"".join(names) or b"\0", dtype=np.uint8)
    d, rg, name_hash = record_dup_fields(src, starts, rg_names, rg_off)
    pairable = (d[:, D_END] >= 0) & ((flags & 0x9) == 0x1)   # paired, mate mapped
    mate = join_mates(src, starts, name_hash, rg, pairable.astype(np.uint8))
    idx = np.arange(len(starts), dtype=np.int64)
    joined = mate >= 0
    m = np.where(joined, mate, idx)
    d[joined, D_MATE] = d[m[joined], D_END]
    d[joined, D_SCORE] += d[m[joined], D_SCORE]
    cand = d[:, D_END] >= 0
    d[cand, D_FIRST] = keys[cand]
    # the tie record, Picard's read 1: the mate with the lower unclipped 5' end, the one written first on a tie
    mine, its = d[:, D_END] >> 1, d[m, D_END] >> 1
    written_first = (keys[m] < keys) | ((keys[m] == keys) & (m < idx))
    mate_first = joined & ((its < mine) | ((its == mine) & written_first))
    d[mate_first, D_FIRST] = keys[m[mate_first]]
    d[mate_first, D_FLAGS] |= FIRST_IS_MATE
    return d, rg, m, int((pairable & ~joined).sum())


# ---- the merge --------------------------------------------------------------------------------------


def read_groups_and_libraries(header: dict):
    """The header's read group IDs, each one's library number, and the library names (Picard's
    "Unknown Library" for read groups without LB and records without a read group: the last)."""
    groups = [rg["ID"] for rg in header.get("RG", [])]
    names = []
    for rg in header.get("RG", []):
        if rg.get("LB", UNKNOWN_LIBRARY) not in names:
            names.append(rg.get("LB", UNKNOWN_LIBRARY))
    if UNKNOWN_LIBRARY not in names:
        names.append(UNKNOWN_LIBRARY)
    lib_of_group = np.array([names.index(rg.get("LB", UNKNOWN_LIBRARY)) for rg in header.get("RG", [])]
                            + [names.index(UNKNOWN_LIBRARY)], dtype=np.int64)   # the last: no read group
    return groups, lib_of_group, names


def merge_sorted(inputs, out_path, index_path=None, header=None, threads=1, level=1, markdup=False,
                 optical_distance=0, metrics_path=None, command="gpualign merge", output_name=None, work_dir=None):
    """Merge coordinate-sorted BAMs into out_path (+ a .bai at index_path), ties in input order;
    with markdup, flag duplicates over all of them (0x400 set or cleared in every record) and write
    the metrics in Picard's layout to metrics_path if given, naming the BAM output_name (default
    out_path). header: a pysam.AlignmentHeader or dict for the output (default: the first
    input's); every input must have its references.
    Returns {"records", "unmatched" (reads whose mapped mate was not found), "metrics", "seconds"
    (wall time of each phase)}."""
    if not inputs:
        raise InputError(f"merging into {out_path}: no BAMs to merge")
    threads = max(1, threads)
    seconds = {}

    @contextlib.contextmanager
    def phase(name):
        start = time.perf_counter()
        with trace.span(name):
            yield
        seconds[name] = round(time.perf_counter() - start, 3)

    base = os.path.basename(out_path)   # an atomic_path temporary: a rerun clears a dead run's spool
    tmpdir = tempfile.mkdtemp(prefix=f"{base if base.startswith('.') else '.' + base}.merge-",
                              dir=work_dir or os.path.dirname(os.path.abspath(out_path)))
    try:
        with phase("inflate inputs"):
            src, bounds = spool_inputs(inputs, os.path.join(tmpdir, "records.bin"), threads)
        with phase("walk input records"):
            starts, sizes, keys, run_off, texts, refs = input_runs(src, inputs, bounds)
        header = output_header(header, texts[0], refs, out_path)
        summary = {"records": len(keys), "unmatched": 0, "metrics": None, "seconds": seconds}
        dup_row = None
        if markdup:
            with phase("mark duplicates"):
                dup_row, summary = mark(src, starts, keys, header.to_dict(), optical_distance, summary)
            if metrics_path:
                write_metrics(metrics_path, summary["metrics"], os.path.basename(output_name or out_path),
                              command, optical_distance)
        with phase("merge, flag and compress"):
            entries = write_runs(out_path, header, level, threads, src, keys, starts, sizes, run_off, dup_row,
                                 bool(index_path))
        if index_path:
            with phase("index"):
                write_bai(index_path, len(header.references), entries, threads)
        return summary
    finally:
        shutil.rmtree(tmpdir, ignore_errors=True)


def spool_inputs(inputs, spool, threads):
    """Every input's inflated bytes, one after another, in the spool file: (its memory map, where each
    input's bytes start, and the end)."""
    bounds = [0]
    with open(spool, "wb") as fh, ThreadPoolExecutor(threads) as pool:
        for path in inputs:
            bounds.append(bounds[-1] + spool_input(path, fh, pool, threads))
    src = np.memmap(spool, dtype=np.uint8, mode="r") if bounds[-1] else np.zeros(0, dtype=np.uint8)
    return src, bounds


def input_runs(src, inputs, bounds):
    """The inputs' records as sorted runs: their starts, sizes and sort keys concatenated, where each
    run starts (run_off), and each input's header text; and the references, which all must share."""
    runs, texts, refs = [], [], None
    for path, a, b in zip(inputs, bounds[:-1], bounds[1:]):
        text, input_refs, at = parse_header(src, a, b, path)
        if refs is None:
            refs = input_refs
        elif input_refs != refs:
            raise InputError(f"BAM {path}: its references (@SQ) differ from {inputs[0]}'s")
        n = record_count(src, at, b)
        if n < 0:
            raise InputError(f"BAM {path}: record {-n} is malformed or cut short")
        starts, sizes, keys, unsorted = record_table(src, at, n)
        if unsorted >= 0:
            raise InputError(f"BAM {path}: not coordinate-sorted (record {unsorted + 1} comes before the one "
                             "above it)")
        runs.append((starts, sizes, keys))
        texts.append(text)
    starts, sizes, keys = (np.concatenate([r[k] for r in runs]) for k in range(3))
    run_off = np.cumsum([0] + [len(r[0]) for r in runs], dtype=np.int64)
    return starts, sizes, keys, run_off, texts, refs


def output_header(header, first_text, refs, out_path):
    """The output's header as pysam's (from a dict, or the first input's text), checked against the
    inputs' references."""
    if header is None:
        header = pysam.AlignmentHeader.from_text(first_text)
    elif isinstance(header, dict):
        header = pysam.AlignmentHeader.from_dict(header)
    if list(zip(header.references, header.lengths)) != refs:
        raise InputError(f"merging into {out_path}: the header's references differ from the inputs'")
    return header


def mark(src, starts, keys, header: dict, optical_distance, summary):
    """decide() over the merged records: (each row's duplicate flag, the summary with the metrics
    by library and the count of reads whose mate was not found)."""
    groups, lib_of_group, names = read_groups_and_libraries(header)
    flags = np.array([], dtype=np.int64) if not len(starts) else \
        (src[starts + 18].astype(np.int64) | (src[starts + 19].astype(np.int64) << 8))
    d, rg, mate, unmatched = dup_rows(src, starts, keys, flags, groups)
    lib = lib_of_group[rg]   # rg -1: the last entry, no read group
    dup, optical = decide(d, lib, mate, rg, optical_distance)
    return dup, dict(summary, unmatched=unmatched, metrics=library_metrics(d, dup, optical, lib, names))
