"""Tests of bench/simulate.py and bench/accuracy.py (scripts, not package modules)."""
from __future__ import annotations

import gzip
import importlib.util
import shutil
import sys
from pathlib import Path

import numpy as np
import pysam
import pytest

BENCH = Path(__file__).resolve().parent.parent / "bench"


def load_script(name: str):
    """Import bench/{name}.py as a module (registered so dataclasses work)."""
    module_name = f"bench_{name}"
    if module_name in sys.modules:
        return sys.modules[module_name]
    spec = importlib.util.spec_from_file_location(module_name, BENCH / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    spec.loader.exec_module(module)
    return module


simulate = load_script("simulate")
accuracy = load_script("accuracy")


def write_random_genome(path: Path, sizes: dict[str, int], seed: int = 7) -> None:
    rng = np.random.default_rng(seed)
    with open(path, "w") as out:
        for name, size in sizes.items():
            seq = np.frombuffer(b"ACGT", dtype=np.uint8)[rng.integers(0, 4, size)].tobytes().decode()
            out.write(f">{name} random contig\n")
            out.writelines(seq[i:i + 60] + "\n" for i in range(0, size, 60))


def simulate_reads(ref: Path, out: Path, n: int, seed: int = 3) -> None:
    simulate.main([
        str(ref), "-n", str(n), "-l", "100", "--sub", "0.01", "--indel", "0.001",
        "--snp", "0.001", "--fraction-n", "0.001", "--seed", str(seed), "-o", str(out),
    ])


# --------------------------------------------------------------------------
# simulator


def test_read_names_round_trip_with_colons_in_contig():
    name = simulate.format_name(12, "chr1:part:2", 345, "-")
    assert simulate.parse_read_name(name) == (12, "chr1:part:2", 345, "-")
    assert accuracy.parse_truth(name) == ("chr1:part:2", 345)


def test_simulator_is_deterministic_and_truthful(tmp_path):
    ref = tmp_path / "ref.fa"
    write_random_genome(ref, {"a": 5000, "b:x": 3000})
    first, second = tmp_path / "1.fq.gz", tmp_path / "2.fq.gz"
    simulate_reads(ref, first, 200)
    simulate_reads(ref, second, 200)
    assert first.read_bytes() == second.read_bytes()

    genome = {c.name: c.seq for c in simulate.read_fasta(ref)}
    with pysam.FastxFile(str(first)) as reads:
        records = list(reads)
    assert len(records) == 200
    for number, record in enumerate(records, start=1):
        num, contig, pos, strand = simulate.parse_read_name(record.name)
        assert num == number and contig in genome and strand in "+-"
        assert len(record.sequence) == len(record.quality) == 100
        read = simulate.ENCODE[np.frombuffer(record.sequence.encode(), dtype=np.uint8)]
        if strand == "-":
            read = simulate.COMPLEMENT[read[::-1]]
        # the first bases are indel-free, so they match the origin up to errors
        window = genome[contig][pos - 1:pos - 1 + simulate.EDGE]
        head = read[:simulate.EDGE]
        assert np.sum(window != head) <= 2


def test_simulator_skips_windows_with_n(tmp_path):
    ref = tmp_path / "ref.fa"
    ref.write_text(">c\n" + "ACGT" * 100 + "N" * 300 + "TGCA" * 100 + "\n")
    reads = tmp_path / "r.fq.gz"
    simulate_reads(ref, reads, 50)
    with gzip.open(reads, "rt") as handle:
        names = [line[1:].strip() for i, line in enumerate(handle) if i % 4 == 0]
    for name in names:
        _, _, pos, _ = simulate.parse_read_name(name)
        # reads span about 100 bases (indels may change that by a few)
        assert pos + 90 <= 401 or pos > 700


# --------------------------------------------------------------------------
# scoring on hand-made records


def make_record(header, name, *, pos=None, cigar="100M", mapq=60, flag=0):
    record = pysam.AlignedSegment(header)
    record.query_name = name
    record.query_sequence = "A" * 100
    record.flag = flag
    if pos is None:
        record.flag |= 0x4
    else:
        record.reference_id = 0
        record.reference_start = pos - 1
        record.cigarstring = cigar
        record.mapping_quality = mapq
    return record


def test_score_records_hand_made():
    header = pysam.AlignmentHeader.from_dict(
        {"HD": {"VN": "1.6"}, "SQ": [{"SN": "chr:1", "LN": 10_000}]}
    )
    names = {
        "exact": "r1:chr:1:1000:+",
        "off": "r2:chr:1:2000:-",
        "unmapped": "r3:chr:1:3000:+",
        "clipped": "r4:chr:1:4000:-",
        "low_mapq": "r5:chr:1:5000:+",
        "missing": "r6:chr:1:6000:+",
    }
    records = [
        make_record(header, names["exact"], pos=1000),
        make_record(header, names["off"], pos=2010, flag=0x10),
        make_record(header, names["unmapped"]),
        make_record(header, names["clipped"], pos=4004, cigar="4S96M", flag=0x10),
        make_record(header, names["low_mapq"], pos=5001, mapq=3),
        # secondary and supplementary records are ignored
        make_record(header, names["off"], pos=2000, flag=0x100),
        make_record(header, names["exact"], pos=1000, flag=0x800),
    ]
    assert accuracy.is_correct(records[0], tolerance=5)
    assert not accuracy.is_correct(records[1], tolerance=5)
    assert accuracy.is_correct(records[1], tolerance=10)
    assert not accuracy.is_correct(records[2], tolerance=5)
    assert accuracy.clipped_leftmost(records[3]) == 4000

    score = accuracy.score_records(records, set(names.values()), tolerance=5)
    assert (score.reads_in, score.primary, score.mapped) == (6, 5, 4)
    assert score.correct == 3                      # exact, clipped, low_mapq
    assert (score.mapq20, score.mapq20_correct) == (3, 2)
    assert (score.missing, score.duplicated, score.unknown) == (1, 0, 0)
    assert not score.once_each

    twice = accuracy.score_records(records[:1] * 2, {names["exact"]}, tolerance=5)
    assert twice.duplicated == 1 and not twice.once_each


# --------------------------------------------------------------------------
# end to end with bwa


def test_bwa_on_random_genome(tmp_path):
    if shutil.which("bwa") is None:
        pytest.skip("bwa is not on PATH")
    ref, reads = tmp_path / "ref.fa", tmp_path / "reads.fq.gz"
    write_random_genome(ref, {"one": 20_000, "two:b": 10_000})
    simulate_reads(ref, reads, 300)

    run = accuracy.run_bwa(ref, reads, tmp_path, threads=1)
    score = accuracy.score_alignment_file(run.alignments, accuracy.read_names_of(reads), 5)
    assert score.reads_in == 300 and score.once_each
    assert score.correct / score.reads_in > 0.9

    row = accuracy.report_row(run, score)
    table = accuracy.markdown_table([row])
    assert table.splitlines()[2].startswith("| bwa | 300 | 300 |")
