"""Bulk BAM encoding (bam.records) against pysam's own record building (bam.sam_records, SAM
text), on fresh random reads."""

import numpy as np
import pysam
import pytest

from gpualign.backends import cpu
from gpualign.bam import bgzf
from gpualign.bam.bai import reg2bin
from gpualign.bam.records import batch_bam_records
from gpualign.bam.sam_records import batch_records
from gpualign.index import build_index
from gpualign.mapper import map_batch
from gpualign.options import MapParams
from gpualign.reads import encode_reads
from gpualign.sam import make_header

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


def test_reg2bin_follows_the_spec_levels():
    assert reg2bin(-1, 0) == 4680                 # unmapped reads, as htslib writes them
    assert reg2bin(0, 100) == 4681                # inside the first 16 kbp bin
    assert reg2bin(16383, 16385) == 585           # spans two 16 kbp bins: next level up
    assert reg2bin(0, 1 << 29) == 0
