"""Reads in chunks (gpualign.workflow.chunks): split into chunks of consecutive records (paired:
between insert-size blocks), each mapped on its own, and merged into the unsplit run's BAM."""

import gzip
import os
from pathlib import Path

import numpy as np
import pysam
import pytest

from gpualign.errors import InputError
from gpualign.fastq import read_batches
from gpualign.index import build_index
from gpualign.mapper import map_reads
from gpualign.options import MapParams, Tuning
from gpualign.reads import encode_reads
from gpualign.workflow import chunks as chunks_module
from gpualign.workflow.chunks import chunk_bounds, merge_sorted_bams, split_fastq

from helpers import random_genome, simulate_reads


def write_fastq(path, n, rng, gz=True):
    recs = []
    for i in range(n):
        length = int(rng.integers(1, 40))
        recs.append(f"@r{i} x\n{''.join(rng.choice(list('ACGTN'), size=length))}\n+\n{'I' * length}\n")
    data = "".join(recs).encode()
    path.write_bytes(gzip.compress(data) if gz else data)
    return data


@pytest.mark.parametrize("n, parts, batch", [(1000, 3, 7), (10, 4, 1 << 20), (3, 5, 2), (64, 1, 5)])
def test_split_keeps_every_record_in_order(tmp_path, monkeypatch, n, parts, batch, rng):
    monkeypatch.setattr(chunks_module, "SPLIT_BATCH", batch)   # chunk edges inside and across batches
    data = write_fastq(tmp_path / "in.fq.gz", n, rng, gz=bool(n % 2))
    outs = [str(tmp_path / f"part{c}.fq") for c in range(parts)]
    sizes = split_fastq(str(tmp_path / "in.fq.gz"), outs)
    bounds = chunk_bounds(n, parts)
    assert sizes == [bounds[c + 1] - bounds[c] for c in range(parts)]
    assert max(sizes) - min(sizes) <= 1
    pieces = [Path(o).read_bytes() for o in outs]
    assert b"".join(pieces) == data
    assert [p.count(b"\n") // 4 for p in pieces] == sizes
    assert sorted(os.listdir(tmp_path)) == sorted(["in.fq.gz"] + [os.path.basename(o) for o in outs])


def test_split_reports_bad_records_with_the_original_line_and_leaves_no_chunks(tmp_path, monkeypatch):
    monkeypatch.setattr(chunks_module, "SPLIT_BATCH", 3)
    good = "".join(f"@r{i}\nACGT\n+\nIIII\n" for i in range(10))
    path = tmp_path / "bad.fq"
    path.write_text(good + "@r10\nAC!T\n+\nIIII\n" + good)
    outs = [str(tmp_path / f"p{c}.fq") for c in range(2)]
    with pytest.raises(InputError, match=r"bad.fq line 42: invalid base '!'"):
        split_fastq(str(path), outs)
    assert sorted(os.listdir(tmp_path)) == ["bad.fq"]
    path.write_text(good + "@r10\nACGT\n")
    with pytest.raises(InputError, match=r"bad.fq line 41: truncated FASTQ record"):
        split_fastq(str(path), outs)
    assert sorted(os.listdir(tmp_path)) == ["bad.fq"]


def test_empty_chunk_maps_to_a_header_only_bam(tmp_path, rng):
    genome, _ = random_genome(rng, lengths=(800,))
    index = build_index(genome, k=8, max_occ=50)
    empty = tmp_path / "part3.fq"
    empty.write_bytes(b"")
    with pytest.raises(InputError, match="empty file"):
        list(read_batches(str(empty), 8, 100))
    out = str(tmp_path / "part3.bam")
    map_reads(genome, index, read_batches(str(empty), 8, 100, allow_empty=True), out, MapParams(),
              backend_name="cpu", log=lambda msg: None, sort=True)
    with pysam.AlignmentFile(out) as bam:
        assert bam.header.to_dict()["HD"]["SO"] == "coordinate" and list(bam) == []


def test_merge_of_sorted_chunks_equals_the_sorted_whole(tmp_path, rng):
    """Ties (same position and strand) across chunks keep the input order, as in one run."""
    genome, seqs = random_genome(rng, lengths=(1500, 600), repeat=100)
    index = build_index(genome, k=8, max_occ=50)
    batch, (names, reads, quals) = simulate_reads(rng, seqs, 60, length=40, sub=0.0, indel=0.0)
    # duplicates give ties in the sort; garbage reads end up unmapped, in input order
    names += [b"dup%d" % i for i in range(8)] + [b"junk%d" % i for i in range(4)]
    reads += [reads[0]] * 8 + [b"N" * 30] * 4
    quals += [quals[0]] * 8 + [b"I" * 30] * 4
    order = rng.permutation(len(names))
    names, reads, quals = ([x[i] for i in order] for x in (names, reads, quals))
    p = MapParams(max_indels=3, min_score=15)

    def sorted_bam(lo, hi, name):
        out = str(tmp_path / name)
        map_reads(genome, index, encode_reads(names[lo:hi], reads[lo:hi], quals[lo:hi], 8), out, p,
                  backend_name="cpu", log=lambda msg: None, sort=True, read_group={"ID": "s", "SM": "s"})
        return out

    sorted_bam(0, len(names), "whole.bam")
    bounds = chunk_bounds(len(names), 3)
    parts = [sorted_bam(bounds[c], bounds[c + 1], f"part{c}.bam") for c in range(3)]
    merge_sorted_bams(parts, str(tmp_path / "merged.bam"), threads=2)
    records = {}
    for name in ("whole.bam", "merged.bam"):
        with pysam.AlignmentFile(str(tmp_path / name)) as bam:
            records[name] = [r.to_string() for r in bam]
    assert records["merged.bam"] == records["whole.bam"]
    assert len(records["whole.bam"]) == len(names)
    with pysam.AlignmentFile(str(tmp_path / "merged.bam")) as bam:   # indexed: region queries work
        assert bam.count(bam.references[0]) == sum(r.split("\t")[2] == bam.references[0] for r in records["whole.bam"])


def test_merge_of_a_missing_chunk_is_one_line(tmp_path):
    with pytest.raises(InputError, match="chunk BAM .*part9.bam: no such file"):
        merge_sorted_bams([str(tmp_path / "part9.bam")], str(tmp_path / "out.bam"))
    assert os.listdir(tmp_path) == []


def test_paired_chunks_map_and_merge_to_the_unsplit_bam(tmp_path, monkeypatch, rng):
    """Paired reads split into interleaved chunks (cut between insert-size blocks), each mapped on its
    own and merged, give the unsplit run's records; the reader's blocks, made small here, may end
    inside a fragment without splitting it."""
    from gpualign import fastq
    from gpualign.batches import read_interleaved_fastq, read_interleaved_pairs
    from gpualign.workflow.chunks import split_pairs
    from helpers import simulate_pairs, write_fastq as write_records
    tuning = Tuning(insert_block=16, min_fragments=4)
    monkeypatch.setattr(fastq, "READ_BLOCK", 3000)
    genome, seqs = random_genome(rng, lengths=(4000, 2500), repeat=0)
    index = build_index(genome, k=8, max_occ=50)
    _, (names, reads, quals) = simulate_pairs(rng, seqs, 100, length=45, insert=(250, 25))
    r1, r2 = tmp_path / "r1.fq", tmp_path / "r2.fq"
    write_records(r1, [n + b"/1" for n in names[0::2]], reads[0::2], quals[0::2])
    write_records(r2, [n + b"/2" for n in names[1::2]], reads[1::2], quals[1::2])
    p = MapParams(max_indels=3, batch_size=40, tuning=tuning)
    block = tuning.insert_block

    def sorted_bam(source, name):
        out = str(tmp_path / name)
        map_reads(genome, index, source, out, p, backend_name="cpu", log=lambda msg: None, sort=True,
                  read_group={"ID": "s", "SM": "s"}, paired=True)
        return out

    whole = sorted_bam(read_interleaved_pairs(str(r1), str(r2), 8, p.batch_size, block=block), "whole.bam")
    outs = [str(tmp_path / f"part{c}.fq") for c in range(3)]
    sizes = split_pairs(str(r1), str(r2), outs, block=block)
    assert sizes == [64, 64, 72]   # 100 fragments: blocks of 16, the last (4) joined to the one before
    parts = [sorted_bam(read_interleaved_fastq(out, 8, p.batch_size, allow_empty=True, block=block), f"part{c}.bam")
             for c, out in enumerate(outs)]
    merge_sorted_bams(parts, str(tmp_path / "merged.bam"))
    records = {}
    for name in (whole, str(tmp_path / "merged.bam")):
        with pysam.AlignmentFile(name) as bam:
            records[name] = [r.to_string() for r in bam]
    assert records[whole] == records[str(tmp_path / "merged.bam")]
    assert len(records[whole]) == 200 and sum("\t" in r for r in records[whole]) == 200


@pytest.mark.parametrize("paired", [False, True], ids=["single", "paired"])
def test_chunks_merged_with_marking_equal_one_marked_run(tmp_path, monkeypatch, rng, paired):
    """Reads with PCR copies (fresh qualities, some the same: ties) split into chunks as the workflow
    splits them (paired: between insert-size blocks), each mapped unmarked and merged with marking
    (merge_chunks): the records, duplicate flags and metrics of one --markdup run of all of them."""
    from gpualign import fastq
    from gpualign.bam.markdup import read_metrics
    from gpualign.batches import read_interleaved_fastq, read_interleaved_pairs
    from gpualign.workflow.chunks import split_pairs
    from helpers import simulate_pairs, write_fastq as write_records
    tuning = Tuning(insert_block=16, min_fragments=4)
    monkeypatch.setattr(fastq, "READ_BLOCK", 3000)
    genome, seqs = random_genome(rng, lengths=(4000, 2500), repeat=0)
    index = build_index(genome, k=8, max_occ=50)
    _, (names, reads, quals) = simulate_pairs(rng, seqs, 100, length=45, insert=(250, 25))
    mates = 2 if paired else 1
    fragments = [(names[i], reads[i:i + mates], quals[i:i + mates]) for i in range(0, len(names), 2)]
    for f in rng.choice(len(fragments), 25):   # PCR copies: a quarter keep the original's qualities
        name, seq, qual = fragments[f]
        fresh = [bytes(rng.integers(35, 74, size=len(q)).astype(np.uint8)) for q in qual]
        fragments.append((name + b"c%d" % len(fragments), seq, qual if rng.random() < 0.25 else fresh))
    fragments = [fragments[i] for i in rng.permutation(len(fragments))]
    p = MapParams(max_indels=3, batch_size=40, tuning=tuning)
    block = tuning.insert_block

    def sorted_bam(source, name, markdup):
        out = str(tmp_path / name)
        map_reads(genome, index, source, out, p, backend_name="cpu", log=lambda msg: None, sort=True,
                  read_group={"ID": "s", "SM": "s", "LB": "lib"}, paired=paired, markdup=markdup,
                  metrics_path=out + ".txt" if markdup else None)
        return out

    if paired:
        r1, r2 = tmp_path / "r1.fq", tmp_path / "r2.fq"
        write_records(r1, [n + b"/1" for n, _, _ in fragments], [s[0] for _, s, _ in fragments],
                      [q[0] for _, _, q in fragments])
        write_records(r2, [n + b"/2" for n, _, _ in fragments], [s[1] for _, s, _ in fragments],
                      [q[1] for _, _, q in fragments])
        whole = sorted_bam(read_interleaved_pairs(str(r1), str(r2), 8, p.batch_size, block=block), "whole.bam", True)
        outs = [str(tmp_path / f"part{c}.fq") for c in range(3)]
        split_pairs(str(r1), str(r2), outs, block=block)
        parts = [sorted_bam(read_interleaved_fastq(out, 8, p.batch_size, allow_empty=True, block=block),
                            f"part{c}.bam", False) for c, out in enumerate(outs)]
    else:
        reads_fq = tmp_path / "reads.fq"
        write_records(reads_fq, *zip(*[(n, s[0], q[0]) for n, s, q in fragments]))
        whole = sorted_bam(read_batches(str(reads_fq), 8, p.batch_size), "whole.bam", True)
        outs = [str(tmp_path / f"part{c}.fq") for c in range(3)]
        split_fastq(str(reads_fq), outs)
        parts = [sorted_bam(read_batches(out, 8, p.batch_size, allow_empty=True), f"part{c}.bam", False)
                 for c, out in enumerate(outs)]
    merged = str(tmp_path / "merged.bam")
    merge_sorted_bams(parts, merged, threads=2, markdup=True, metrics=merged + ".txt")
    records = {}
    for name in (whole, merged):
        with pysam.AlignmentFile(name) as bam:
            records[name] = [r.to_string() for r in bam]
    assert records[merged] == records[whole]
    assert sum(r.split("\t")[1] != "" and int(r.split("\t")[1]) & 0x400 != 0 for r in records[whole]) >= 20
    assert read_metrics(merged + ".txt") == read_metrics(whole + ".txt")
