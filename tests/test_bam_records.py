"""bam/records.py: a batch's BAM records encoded in bulk (batch_bam_records) against pysam's own
record building (bam/sam_records.py, the SAM text path) on random reads mapped to a random genome;
its MD and NM (the one implementation, for BAM and SAM text alike) on hand-worked cases and against
the naive reference on random alignments; CIGARs with soft clips (sam_records.full_cigar). Random
inputs come from the seeded `rng`."""

import types

import numpy as np
import pysam
import pytest

from gpualign.backends import cpu
from gpualign.bam import bgzf
from gpualign.bam.bai import reg2bin
from gpualign.bam.records import batch_bam_records
from gpualign.bam.sam_records import batch_records, full_cigar
from gpualign.encode import OP_D, OP_I, OP_M, OP_S, pack_codes, pack_nmask
from gpualign.extend import TR_COLUMNS, TR_END_ROW, TR_NOPS, TR_READ_START, TR_REF_START
from gpualign.index import build_index
from gpualign.memmove import MEMMOVE
from gpualign.mapper import map_batch
from gpualign.md import md_and_nm
from gpualign.options import MapParams
from gpualign.reads import encode_reads
from gpualign.sam import make_header

import naive
from helpers import random_genome, simulate_reads


@pytest.mark.parametrize("rg_id", [None, "grp1"])
def test_bulk_records_equal_pysam_records(tmp_path, monkeypatch, rg_id, rng):
    monkeypatch.setattr(bgzf, "BGZF_INPUT", 997)   # many BGZF blocks, cut inside records
    genome, seqs = random_genome(rng, lengths=(2500, 900), repeat=150)
    index = build_index(genome, k=8)
    batch, (names, reads, quals) = simulate_reads(rng, seqs, 60, length=int(rng.integers(40, 120)),
                                                  sub=0.03, indel=0.02, n_rate=0.01)
    # reads that cannot map and odd lengths: unmapped records must match too
    names += [b"junk", b"empty", b"short"]
    reads += [bytes(rng.choice(list(b"ACGT"), size=90).astype(np.uint8)), b"", b"ACGTA"]
    quals += [b"I" * 90, b"", b"IIIII"]
    batch = encode_reads(names, reads, quals, 8)
    res = map_batch(batch, genome, index, MapParams(max_indels=4, min_score=20), cpu)
    header = make_header(genome, {"ID": rg_id, "SM": "s"} if rg_id else None, "gpualign test")
    with pysam.AlignmentFile(str(tmp_path / "ref.bam"), "wb", header=header) as out:
        for rec in batch_records(batch, res, genome, header, rg_id):
            out.write(rec)
    with bgzf.BamWriter(str(tmp_path / "bulk.bam"), header, level=1, threads=3) as out:
        out.write(batch_bam_records(batch, res, genome, rg_id)[0])
    pysam.quickcheck(str(tmp_path / "bulk.bam"))
    with pysam.AlignmentFile(str(tmp_path / "ref.bam")) as a, pysam.AlignmentFile(str(tmp_path / "bulk.bam")) as b:
        assert str(a.header) == str(b.header)
        ref, bulk = list(a), list(b)
    assert len(bulk) == len(ref) == len(batch)
    for x, y in zip(ref, bulk):
        assert x.to_string() == y.to_string()
        if not x.is_unmapped:
            assert y.bin == reg2bin(x.reference_start, x.reference_end)
    assert sum(not r.is_unmapped for r in bulk) > 30 and any(r.is_reverse for r in bulk)


def codes(s):
    return np.array(["ACGTN".index(c) for c in s], dtype=np.uint8)


def md_nm(query, genome, cigar, gstart=0):
    """md_and_nm of cigar (soft clips included) placing query at genome[gstart:], as (MD, NM)."""
    core = [(op, ln) for op, ln in cigar if op != OP_S]
    qs = cigar[0][1] if cigar[0][0] == OP_S else 0
    ops = np.array([[op for op, _ in core]], dtype=np.uint8)
    lens = np.array([[ln for _, ln in core]], dtype=np.int32)
    trace = np.zeros((1, TR_COLUMNS), dtype=np.int64)
    trace[0, TR_READ_START], trace[0, TR_REF_START], trace[0, TR_NOPS] = qs, gstart, len(core)
    trace[0, TR_END_ROW] = len(query) - (cigar[-1][1] if cigar[-1][0] == OP_S else 0)
    ref = (pack_codes(genome), pack_nmask(genome))
    size, nm = md_and_nm(query, 0, ops.ravel(), lens.ravel(), 0, 1, trace, 0, *ref, np.zeros(1, dtype=np.uint8), 0, False)
    buf = np.zeros(size, dtype=np.uint8)
    end, nm_written = md_and_nm(query, 0, ops.ravel(), lens.ravel(), 0, 1, trace, 0, *ref, buf, 0, True)
    assert (end, nm_written) == (size, nm)
    return bytes(buf).decode(), nm


def test_md_and_nm_follow_the_sam_spec():
    # 2M1D5M of read ACGTTAN on reference ACAGTCAG: deletion of A, T/C mismatch, N/G mismatch
    assert md_nm(codes("ACGTTAN"), codes("ACAGTCAG"), [(OP_M, 2), (OP_D, 1), (OP_M, 5)]) == ("2^A2C1G0", 3)
    # a mismatch right after a deletion needs a 0 between them
    assert md_nm(codes("ACTT"), codes("ACGAT"), [(OP_M, 2), (OP_D, 1), (OP_M, 2)]) == ("2^G0A1", 2)


def test_md_nm_with_insertion_and_clips():
    cigar = [(OP_S, 2), (OP_M, 3), (OP_I, 2), (OP_M, 2)]
    assert md_nm(codes("TTACGAAGT"), codes("ACGGT"), cigar) == ("5", 2)


def test_md_and_nm_match_the_naive_reference(rng):
    genome = rng.integers(0, 4, size=3000).astype(np.uint8)
    genome[rng.random(3000) < 0.02] = 4
    for _ in range(300):
        cigar = [(OP_S, int(rng.integers(1, 6)))] if rng.random() < 0.3 else []
        cigar += [(OP_M, int(rng.integers(1, 30)))]
        for _ in range(int(rng.integers(0, 4))):
            cigar += [(int(rng.choice([OP_I, OP_D])), int(rng.integers(1, 5))), (OP_M, int(rng.integers(1, 30)))]
        if rng.random() < 0.3:
            cigar.append((OP_S, int(rng.integers(1, 6))))
        span = sum(ln for op, ln in cigar if op in (OP_M, OP_D))
        gstart = int(rng.integers(0, len(genome) - span))
        query, gi = [], gstart
        for op, ln in cigar:
            if op == OP_M:
                seg = genome[gi:gi + ln].copy()
                change = rng.random(ln) < 0.1
                seg[change] = rng.integers(0, 5, size=int(change.sum()))
                query += list(seg)
            elif op in (OP_I, OP_S):
                query += list(rng.integers(0, 5, size=ln))
            gi += ln if op in (OP_M, OP_D) else 0
        query = np.array(query, dtype=np.uint8)
        expected = naive.md_nm(query, genome[gstart:gstart + span], cigar)
        assert md_nm(query, genome, cigar, gstart) == expected, (cigar, gstart)


def test_full_cigar_adds_soft_clips():
    ops = np.array([OP_M, OP_I, OP_M], dtype=np.uint8)
    lens = np.array([5, 1, 3], dtype=np.int32)
    assert full_cigar(ops, lens, 3, 2, 11, 14) == [(OP_S, 2), (OP_M, 5), (OP_I, 1), (OP_M, 3), (OP_S, 3)]
    assert full_cigar(ops, lens, 1, 0, 5, 5) == [(OP_M, 5)]


def worst_records_batch(rng, pairs=40):
    """reads, aln, ref and md of 2 * pairs random reads (record_bound's worst cases): reads that
    mismatch everywhere, alternate one-base deletions with one-base matches or carry many
    insertions, on both strands; a tenth unmapped."""
    from gpualign.md import md_of_rows
    from gpualign.encode import STRAND_BIT
    glen = 4000
    gcodes = rng.integers(0, 4, size=glen).astype(np.uint8)
    ref = (pack_codes(gcodes), pack_nmask(gcodes), np.array([0], dtype=np.int64))
    n_reads = 2 * pairs
    lengths = rng.integers(1, 150, size=n_reads)
    read_off = np.concatenate(([0], np.cumsum(lengths))).astype(np.int64)
    codes = rng.integers(0, 5, size=read_off[-1]).astype(np.uint8)
    names = np.frombuffer(b"".join(b"r%d" % i for i in range(n_reads)), dtype=np.uint8).copy()
    name_off = np.concatenate(([0], np.cumsum([len(b"r%d" % i) for i in range(n_reads)]))).astype(np.int64)
    reads = (names, name_off, codes, codes.copy(), read_off)
    width = 2 * 150 + 2
    ops = np.zeros((n_reads, width), dtype=np.uint8)
    lens = np.zeros((n_reads, width), dtype=np.int32)
    trace = np.zeros((n_reads, TR_COLUMNS), dtype=np.int64)
    for r, n in enumerate(lengths):
        clip = rng.integers(0, 3, size=2) * (n > 8)   # soft clips at either end of some reads
        style, x, left = rng.integers(3), 0, int(n - clip.sum())
        while left > 0:   # M runs broken by D (style 0: 1-base each), or by I (style 1), or M only
            m = 1 if style == 0 else int(rng.integers(1, left + 1))
            ops[r, x], lens[r, x] = OP_M, min(m, left)
            left -= lens[r, x]
            x += 1
            if left > 0 and style < 2:
                ops[r, x], lens[r, x] = (OP_D, int(rng.integers(1, 4))) if style == 0 else (OP_I, 1)
                left -= 1 if style == 1 else 0
                x += 1
        trace[r, TR_NOPS], trace[r, TR_READ_START], trace[r, TR_END_ROW] = x, clip[0], n - clip[1]
        trace[r, TR_REF_START] = int(rng.integers(0, glen - 3 * n - 10))
    mapped = rng.random(n_reads) < 0.9
    row_of = np.where(mapped, np.arange(n_reads), -1).astype(np.int64)
    key = np.where(rng.random(n_reads) < 0.5, STRAND_BIT, 0).astype(np.int64)
    mapq, score = np.full(n_reads, 60, dtype=np.int64), np.full(n_reads, -123456, dtype=np.int64)
    aln = (row_of, key, mapq, score, score.copy(), ops, lens, trace)
    rc_codes = np.concatenate([np.where(codes[a:b] == 4, 4, 3 - codes[a:b])[::-1]
                               for a, b in zip(read_off[:-1], read_off[1:])]).astype(np.uint8)
    md = md_of_rows(np.arange(n_reads), np.where(mapped, key, -1), codes, rc_codes, read_off, ops, lens, trace,
                    *ref[:2])
    return reads, aln, ref, md


def test_record_bound_holds_for_the_worst_md_and_cigars(rng):
    """encode_batch writes records into a buffer sized by record_bound, without measuring them first:
    the bound must hold for every record, down to reads that mismatch everywhere, alternate one-base
    deletions with one-base matches, carry a mate's long CIGAR, and a read group."""
    from gpualign.bam.records import encode_record, record_bound, record_fields
    reads, aln, ref, md = worst_records_batch(rng)
    n_reads = len(reads[4]) - 1
    for paired in (False, True):
        fields = record_fields(aln, ref, np.ones(n_reads, dtype=np.int64), paired, 0, n_reads)
        for rg in (np.zeros(0, dtype=np.uint8), np.frombuffer(b"a-long-read-group-id", dtype=np.uint8)):
            for r in range(n_reads):
                size = encode_record(r, reads, aln, md, rg, fields[r], np.zeros(1, dtype=np.uint8), 0, False, MEMMOVE)
                assert size <= record_bound(r, reads, aln, md, rg, paired), (r, paired)


@pytest.mark.parametrize("paired", [False, True])
@pytest.mark.parametrize("rg", [b"", b"grp-1"])
def test_the_gpus_records_are_the_hosts(rng, paired, rg):
    """cuda.records_on_device (the GPU's kernel, put_record as a device function, its fields a thread
    a read) gives encode_batch's bytes, offsets and sort keys, on record_bound's worst cases with soft
    clips, unmapped reads and mates, in the GPU's CIGAR layout ([op, row]) and rows apart from reads;
    and writes nothing where the records overflow the buffer it is given."""
    from numba import cuda as numba_cuda
    from gpualign.backends import cuda
    from gpualign.bam.records import encode_batch
    reads, aln, ref, md = worst_records_batch(rng, pairs=12)
    n = len(reads[4]) - 1
    row_of, key, mapq, score, sub, ops, lens, trace = aln
    key = np.where(row_of >= 0, key, -1)
    sub = np.where(rng.random(n) < 0.5, score - 7, -1)      # XS on some
    mapq = rng.integers(0, 61, size=n)
    perm = rng.permutation(n)                                 # traceback rows in another order than reads
    rows = np.full(n, -1, dtype=np.int64)
    rows[row_of >= 0] = perm[row_of[row_of >= 0]]
    rows[[2, 3, 5]] = -1   # a fragment unmapped, and a read whose mate mapped
    key[[2, 3, 5]] = -1
    inverse = np.argsort(perm)
    t_ops, t_lens, t_trace = ops[inverse], lens[inverse], trace[inverse]
    text, md_off, nm = md
    sizes = np.diff(md_off)[inverse]
    t_md_off = np.concatenate(([0], np.cumsum(sizes))).astype(np.int64)
    t_text = np.concatenate([text[md_off[i]:md_off[i + 1]] for i in inverse] + [np.zeros(0, np.uint8)])
    proper = (rng.random(n) < 0.7).astype(np.int64)
    rgb = np.frombuffer(rg, dtype=np.uint8)
    host = encode_batch(reads, (rows, key, mapq, score, sub, t_ops, t_lens, t_trace), ref, (t_text, t_md_off, nm[inverse]),
                        rgb, proper, paired, 0, n, MEMMOVE, False)[:3]
    assert host[2][2] == np.iinfo(np.int64).max   # unmapped records sort last
    on = numba_cuda.to_device
    dev = [on(a) for a in reads]
    off, buf, keys = cuda.records_on_device(
        False, on(rows), tuple(on(a) for a in (key, mapq, score, sub)), on(proper), paired, dev,
        on(np.ascontiguousarray(t_ops.T)), on(np.ascontiguousarray(t_lens.T)), on(t_trace),
        (on(np.append(t_text, 0).astype(np.uint8)), on(t_md_off), on(nm[inverse])),
        types.SimpleNamespace(offsets=ref[2]), rgb, int(host[1][-1]))
    got_off = off.copy_to_host()
    assert np.array_equal(got_off, host[1])
    assert np.array_equal(keys.copy_to_host()[:n], host[2])
    assert np.array_equal(buf.copy_to_host()[:got_off[-1]], host[0])
    off, buf, _ = cuda.records_on_device(   # one byte short: nothing written
        False, on(rows), tuple(on(a) for a in (key, mapq, score, sub)), on(proper), paired, dev,
        on(np.ascontiguousarray(t_ops.T)), on(np.ascontiguousarray(t_lens.T)), on(t_trace),
        (on(np.append(t_text, 0).astype(np.uint8)), on(t_md_off), on(nm[inverse])),
        types.SimpleNamespace(offsets=ref[2]), rgb, int(host[1][-1]) - 1)
    assert off.copy_to_host()[-1] == host[1][-1]
