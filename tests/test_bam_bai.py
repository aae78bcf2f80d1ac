"""bam/bai.py: the bin numbers (reg2bin) against the SAM specification's levels and its reference
code; the .bai index the sorted writer builds from its records, against the one `samtools index`
(pysam.index) makes of the same BAM: the same answers to region queries, the same counts, offsets
and linear index, and every record inside a chunk of its own bin. The bytes differ where htslib
folds small bins into their parents, as the specification allows. The BAM has several contigs
(one without reads), unmapped reads placed and unplaced, and records that span 16 kbp windows and
larger bins; small BGZF blocks put records across block edges."""

import shutil
import struct

import numpy as np
import pysam
import pytest

from gpualign.bam import bai, bgzf
from gpualign.bam.sort import SortedBam

from helpers import bam_record_bytes, coordinate_keys, random_alignments, reg2bin

LENGTHS = (2_000_000, 300_000, 40_000, 5_000, 1_000)
PSEUDO_BIN = 37450


def test_reg2bin_follows_the_spec_levels():
    assert bai.reg2bin(-1, 0) == 4680                 # unmapped reads, as htslib writes them
    assert bai.reg2bin(0, 100) == 4681                # inside the first 16 kbp bin
    assert bai.reg2bin(16383, 16385) == 585           # spans two 16 kbp bins: next level up
    assert bai.reg2bin(0, 1 << 29) == 0


def test_reg2bin_is_the_specifications_code(rng):
    """On random intervals of every level (lengths from 1 base to 2^29), the bin the SAM
    specification's reg2bin (section 5.3, in helpers) gives."""
    begs = rng.integers(0, 1 << 29, size=3000)
    ends = np.minimum(begs + (1 << rng.integers(0, 30, size=3000)) - rng.integers(0, 2, size=3000), 1 << 29)
    ends = np.maximum(ends, begs + 1)
    got = [bai.reg2bin(int(b), int(e)) for b, e in zip(begs, ends)]
    assert got == [reg2bin(int(b), int(e)) for b, e in zip(begs, ends)]
    assert {sum(g >= first for first in (1, 9, 73, 585, 4681)) for g in got} == set(range(6))   # every level


@pytest.fixture(params=["blocks of 65280", "blocks of 997"])
def block(request, monkeypatch):
    size = int(request.param.split()[-1])
    monkeypatch.setattr(bgzf, "BGZF_INPUT", size)
    return size


@pytest.fixture
def bams(tmp_path, rng, block):
    """(ours.bam with the writer's .bai, theirs.bam: the same bytes with samtools' .bai, header)."""
    header = pysam.AlignmentHeader.from_dict({
        "HD": {"VN": "1.6", "SO": "coordinate"},
        "SQ": [{"SN": f"c{i}", "LN": ln} for i, ln in enumerate(LENGTHS)]})
    segments = random_alignments(rng, header, 3000, with_reads=range(4))
    ours, theirs = str(tmp_path / "ours.bam"), str(tmp_path / "theirs.bam")
    encoded = [(*bam_record_bytes(header, segments[a:a + 700], tmp_path), coordinate_keys(segments[a:a + 700]))
               for a in range(0, len(segments), 700)]
    out = SortedBam(ours, header, lambda i, result: encoded[i], 6, 2, index_path=ours + ".bai",
                    work_dir=str(tmp_path))
    for i in range(len(encoded)):
        out.add(i, None)
    out.close()
    shutil.copy(ours, theirs)
    pysam.index(theirs)
    return ours, theirs, header


def parse_bai(data):
    """([(bins {bin: [(beg, end)]}, pseudo-bin (beg, end, mapped, unmapped), linear index)] per
    reference, number of unplaced reads), as the SAM specification (section 5.2) lays them out."""
    assert data[:4] == b"BAI\x01"
    (n_ref,), o = struct.unpack_from("<i", data, 4), 8
    refs = []
    for _ in range(n_ref):
        (n_bin,), o = struct.unpack_from("<i", data, o), o + 4
        bins, pseudo = {}, None
        for _ in range(n_bin):
            (bin_id, n_chunk), o = struct.unpack_from("<Ii", data, o), o + 8
            chunks = [struct.unpack_from("<QQ", data, o + 16 * c) for c in range(n_chunk)]
            o += 16 * n_chunk
            if bin_id == PSEUDO_BIN:
                pseudo = (*chunks[0], *chunks[1])
            else:
                assert bin_id not in bins
                bins[bin_id] = chunks
        (n_intv,), o = struct.unpack_from("<i", data, o), o + 4
        linear, o = list(struct.unpack_from(f"<{n_intv}Q", data, o)), o + 8 * n_intv
        refs.append((bins, pseudo, linear))
    (unplaced,), o = struct.unpack_from("<Q", data, o), o + 8
    assert o == len(data)
    return refs, unplaced


def read_index(path):
    with open(path + ".bai", "rb") as fh:
        return parse_bai(fh.read())


def placed_records(path):
    """(name, tid, pos, end, bin, start and end virtual offsets) of the records with a contig;
    end is pos + 1 where the record covers no reference (an unmapped read), as htslib counts."""
    out = []
    with pysam.AlignmentFile(path) as bam:
        while True:
            start = bam.tell()
            try:
                r = next(bam)
            except StopIteration:
                break
            if r.reference_id >= 0:
                end = r.reference_end if not r.is_unmapped else r.reference_start + 1
                out.append((r.query_name, r.reference_id, r.reference_start, end, r.bin, start, bam.tell()))
    return out


def test_counts_offsets_and_linear_index_are_samtools(bams):
    ours, theirs, header = bams
    (mine, unplaced), (ref, ref_unplaced) = read_index(ours), read_index(theirs)
    assert len(mine) == len(ref) == len(LENGTHS) and unplaced == ref_unplaced > 0
    assert pysam.idxstats(ours) == pysam.idxstats(theirs)
    records = placed_records(ours)
    for tid, ((_, pseudo, linear), (_, ref_pseudo, ref_linear)) in enumerate(zip(mine, ref)):
        # first and last offsets of the reference's records, mapped and unmapped counts
        assert pseudo == ref_pseudo
        rows = [r for r in records if r[1] == tid]
        if not rows:
            assert pseudo is None and linear == [] == ref_linear
            continue
        # windows before the first record hold 0 where htslib repeats the first offset: both are
        # lower bounds of the records there (none); every other window is the same
        first = rows[0][2] >> 14
        assert len(linear) == len(ref_linear) == max((r[3] - 1) >> 14 for r in rows) + 1
        assert linear[:first] == [0] * first and linear[first:] == ref_linear[first:]


def test_every_record_lies_in_a_chunk_of_its_own_bin(bams):
    ours, _, _ = bams
    mine, _ = read_index(ours)
    records = placed_records(ours)
    covered = 0
    for tid, (bins, _, _) in enumerate(mine):
        for name, _, pos, end, bin_id, vstart, vend in (r for r in records if r[1] == tid):
            assert bin_id == reg2bin(pos, end), name
            assert any(beg <= vstart and vend <= fin for beg, fin in bins[bin_id]), name
            covered += 1
        # chunks are whole records of their bin, in file order, not overlapping
        chunks = sorted(c for cs in bins.values() for c in cs)
        assert all(a[1] <= b[0] for a, b in zip(chunks, chunks[1:]))
    assert covered == len(records) and len({r[4] for r in records}) > 50   # bins of several levels
    assert {reg2bin(r[2], r[3]) < 4681 for r in records} == {True, False}


def test_region_queries_equal_samtools_index_and_a_scan(bams, rng):
    ours, theirs, header = bams
    records = placed_records(ours)
    with pysam.AlignmentFile(ours) as a, pysam.AlignmentFile(theirs) as b:
        for tid, (contig, length) in enumerate(zip(header.references, header.lengths)):
            regions = [(0, length)]
            for _ in range(60):
                s = int(rng.integers(0, length))
                regions.append((s, min(length, s + int(rng.choice([1, 100, 16384, 200_000, length])))))
            for w in range(1, (length >> 14) + 1, max(1, (length >> 14) // 10)):   # at window edges
                regions += [((w << 14) - 1, w << 14), (w << 14, (w << 14) + 1)]
            for s, e in regions:
                want = [r[0] for r in records if r[1] == tid and r[2] < e and r[3] > s]
                got = [r.query_name for r in a.fetch(contig, s, e)]
                assert got == [r.query_name for r in b.fetch(contig, s, e)] == want, (contig, s, e)
    # the unplaced reads, which samtools finds through the index's last offsets
    assert pysam.view(ours, "*") == pysam.view(theirs, "*") != ""


def test_build_bai_equals_the_whole_array_reference(rng, monkeypatch):
    """bai.build_bai (counting sort and one pass per reference, numba) writes the bytes of the plain
    reference (naive.bai_bytes) on random coordinate-ordered records: several references, some
    empty, reads spanning windows and bin levels, unmapped reads placed at their mate, unplaced
    reads at the end; and with placed and unplaced records interleaved (the general path). Each
    reference whole, and in pieces of a few records on several threads (the pieces' chunks and
    windows joined)."""
    import naive
    from gpualign.bam import bai
    from gpualign.bam.bai import reg2bin

    def build_bai(*args):
        whole = bai.build_bai(*args)
        with monkeypatch.context() as m:
            m.setattr(bai, "PIECE_RECORDS", int(rng.integers(1, 40)))
            assert bai.build_bai(*args, threads=int(rng.integers(2, 9))) == whole
        return whole

    from gpualign.sam import FLAG_UNMAPPED
    for _ in range(30):
        n_ref = int(rng.integers(1, 5))
        n = int(rng.integers(1, 3000))
        tid = np.sort(rng.integers(-1, n_ref, size=n))
        tid = np.concatenate((tid[tid >= 0], tid[tid < 0]))
        pos = np.zeros(n, dtype=np.int64)
        for ref in range(n_ref):
            rows = tid == ref
            pos[rows] = np.sort(rng.integers(0, int(rng.choice([2000, 300_000, 20_000_000])), size=rows.sum()))
        length = rng.choice([1, 100, 150, 40_000], size=n, p=[0.05, 0.6, 0.3, 0.05])
        end = pos + length
        flag = np.where(rng.random(n) < 0.1, FLAG_UNMAPPED, 0).astype(np.int64)
        end[flag > 0] = pos[flag > 0] + 1
        bins = np.array([reg2bin(int(p), int(e)) if t >= 0 else 4680 for p, e, t in zip(pos, end, tid)],
                        dtype=np.int64)
        size = rng.integers(60, 400, size=n)
        stream = np.cumsum(size)
        block = (stream - size) // 0xFF00
        vstart = (block.astype(np.uint64) * np.uint64(7 << 16)) + ((stream - size) % 0xFF00).astype(np.uint64)
        vend = vstart + size.astype(np.uint64)
        args = (n_ref, tid, pos, end, bins, flag, vstart, vend)
        assert build_bai(*args) == naive.bai_bytes(*args)
        shuffled = rng.permutation(n)   # placed rows no longer a prefix: the general path
        keep = np.sort(shuffled[:n // 2])
        mixed = (n_ref, np.where(np.isin(np.arange(n), keep), tid, -1), pos, end, bins, flag, vstart, vend)
        assert build_bai(*mixed) == naive.bai_bytes(*mixed)
