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


# --------------------------------------------------------------------------
# paired end


def simulate_pairs(ref: Path, out1: Path, out2: Path, n: int, seed: int = 3, insert=(400, 40)) -> None:
    simulate.main([
        str(ref), "-n", str(n), "-l", "150", "--sub", "0.01", "--indel", "0.001", "--snp", "0.001",
        "--fraction-n", "0.001", "--insert-mean", str(insert[0]), "--insert-sd", str(insert[1]),
        "--seed", str(seed), "-o", str(out1), str(out2),
    ])


def fastq_records(path: Path) -> list:
    with pysam.FastxFile(str(path)) as handle:
        return [(entry.name, entry.sequence) for entry in handle]


def forward_head(sequence: str, strand: str) -> np.ndarray:
    """The read's bases on the forward strand, leftmost first."""
    read = simulate.ENCODE[np.frombuffer(sequence.encode(), dtype=np.uint8)]
    return simulate.COMPLEMENT[read[::-1]] if strand == "-" else read


def test_pair_names_round_trip_and_truth_per_mate():
    name = simulate.format_pair_name(7, "chr1:part:2", (345, "+"), (590, "-"))
    assert simulate.parse_pair_name(name) == (7, "chr1:part:2", (345, "+"), (590, "-"))
    assert accuracy.parse_truth(name, 1) == ("chr1:part:2", 345)
    assert accuracy.parse_truth(name, 2) == ("chr1:part:2", 590)
    single = simulate.format_name(7, "chr1:part:2", 345, "+")
    with pytest.raises(ValueError):
        accuracy.parse_truth(name)               # a pair's record must name its mate
    with pytest.raises(ValueError):
        accuracy.parse_truth(single, 1)
    with pytest.raises(ValueError):
        simulate.parse_pair_name(single)
    # a single-end read on a contig whose name looks like pair fields stays single-end
    tricky = simulate.format_name(3, "x:1:+", 10, "-")
    assert accuracy.parse_truth(tricky) == ("x:1:+", 10)


def test_pair_simulator_is_deterministic_and_truthful(tmp_path):
    ref = tmp_path / "ref.fa"
    write_random_genome(ref, {"a": 8000, "b:x": 6000})
    r1, r2 = tmp_path / "r1.fq.gz", tmp_path / "r2.fq.gz"
    simulate_pairs(ref, r1, r2, 300)
    again = tmp_path / "again1.fq.gz", tmp_path / "again2.fq.gz"
    simulate_pairs(ref, *again, 300)
    assert r1.read_bytes() == again[0].read_bytes() and r2.read_bytes() == again[1].read_bytes()

    genome = {c.name: c.seq for c in simulate.read_fasta(ref)}
    mates1, mates2 = fastq_records(r1), fastq_records(r2)
    assert [n for n, _ in mates1] == [n for n, _ in mates2]      # identical names, as bwa needs
    sizes, r1_strands = [], set()
    for number, ((name, seq1), (_, seq2)) in enumerate(zip(mates1, mates2), start=1):
        num, contig, (pos1, strand1), (pos2, strand2) = simulate.parse_pair_name(name)
        assert num == number and contig in genome and {strand1, strand2} == {"+", "-"}
        r1_strands.add(strand1)
        for seq, pos, strand in ((seq1, pos1, strand1), (seq2, pos2, strand2)):
            assert len(seq) == 150
            # the leftmost bases are indel-free, so they match the origin up to errors and SNPs
            window = genome[contig][pos - 1:pos - 1 + simulate.EDGE]
            assert np.sum(window != forward_head(seq, strand)[:simulate.EDGE]) <= 2
        plus_pos, minus_pos = (pos1, pos2) if strand1 == "+" else (pos2, pos1)
        sizes.append(minus_pos + 150 - plus_pos)                  # fragment length, +- indels
    assert r1_strands == {"+", "-"}
    assert 380 < np.mean(sizes) < 420 and 25 < np.std(sizes) < 55


def test_pair_simulator_keeps_fragments_off_n_and_ends(tmp_path):
    ref = tmp_path / "ref.fa"
    ref.write_text(">c\n" + "ACGT" * 300 + "N" * 300 + "TGCA" * 300 + "\n")     # N at 1201..1500
    r1, r2 = tmp_path / "r1.fq.gz", tmp_path / "r2.fq.gz"
    simulate_pairs(ref, r1, r2, 50, insert=(300, 30))
    for name, _ in fastq_records(r1):
        _, _, (pos1, _), (pos2, _) = simulate.parse_pair_name(name)
        lo, hi = min(pos1, pos2), max(pos1, pos2) + 150       # the fragment, about
        assert lo >= 1 and hi <= 2701 + 5
        assert hi <= 1201 + 5 or lo > 1500


def test_score_paired_records_hand_made():
    header = pysam.AlignmentHeader.from_dict(
        {"HD": {"VN": "1.6"}, "SQ": [{"SN": "chr:1", "LN": 10_000}]}
    )
    good = simulate.format_pair_name(1, "chr:1", (1000, "+"), (1250, "-"))
    swapped = simulate.format_pair_name(2, "chr:1", (3000, "-"), (2700, "+"))
    lonely = simulate.format_pair_name(3, "chr:1", (5000, "+"), (5300, "-"))
    proper = 0x1 | 0x2
    records = [
        make_record(header, good, pos=1000, flag=proper | 0x20 | 0x40),
        make_record(header, good, pos=1250, flag=proper | 0x10 | 0x80),
        # each mate placed where the other one belongs: both wrong
        make_record(header, swapped, pos=2700, flag=proper | 0x10 | 0x40),
        make_record(header, swapped, pos=3000, flag=proper | 0x20 | 0x80),
        # mate 1 right but not properly paired; mate 2 unmapped; mate 2 of the pair never seen
        make_record(header, lonely, pos=5000, flag=0x1 | 0x8 | 0x40),
        make_record(header, lonely, flag=0x1 | 0x80),
        make_record(header, good, pos=1250, flag=0x1 | 0x80 | 0x100),      # secondary: ignored
    ]
    truth = {(name, mate) for name in (good, swapped, lonely) for mate in (1, 2)}
    truth.add((simulate.format_pair_name(4, "chr:1", (8000, "+"), (8200, "-")), 1))
    score = accuracy.score_records(records, truth, tolerance=5)
    assert score.paired and (score.reads_in, score.primary, score.mapped) == (7, 6, 5)
    assert score.correct == 3 and score.mate_correct == [2, 1]
    assert score.mate_primary == [3, 3] and score.proper == 4
    assert (score.missing, score.duplicated, score.unknown) == (1, 0, 0)

    # a pair's record without its mate flag has no truth: unknown and not correct
    bare = accuracy.score_records([make_record(header, good, pos=1000)], truth, tolerance=5)
    assert (bare.unknown, bare.correct) == (1, 0)

    row = accuracy.report_row(accuracy.Run("x", Path("x.bam")), score)
    assert row["properly_paired_pct"] == f"{100 * 4 / 6:.2f}"
    assert accuracy.markdown_table([row]).splitlines()[0].endswith("r1_correct_pct | r2_correct_pct |")


def test_bwa_paired_on_random_genome(tmp_path):
    if shutil.which("bwa") is None:
        pytest.skip("bwa is not on PATH")
    ref, r1, r2 = tmp_path / "ref.fa", tmp_path / "r1.fq.gz", tmp_path / "r2.fq.gz"
    write_random_genome(ref, {"one": 30_000, "two:b": 20_000})
    simulate_pairs(ref, r1, r2, 300)

    run = accuracy.run_bwa(ref, [r1, r2], tmp_path, threads=1)
    truth = accuracy.read_names_of(r1, r2)
    score = accuracy.score_alignment_file(run.alignments, truth, 5)
    assert score.paired and score.reads_in == 600 and score.once_each
    assert score.mate_primary == [300, 300]
    assert score.correct / score.reads_in > 0.95
    assert min(score.mate_correct) / 300 > 0.95
    assert score.proper / score.primary > 0.95

    # move one correctly placed record 100 bases: exactly that mate turns wrong
    with pysam.AlignmentFile(str(run.alignments)) as sam:
        records = list(sam)
    victim = next(r for r in records if r.is_read2 and not (r.is_secondary or r.is_supplementary)
                  and accuracy.is_correct(r, 5))
    victim.reference_start += 100
    moved = accuracy.score_records(records, truth, 5)
    assert moved.correct == score.correct - 1
    assert moved.mate_correct == [score.mate_correct[0], score.mate_correct[1] - 1]

    row = accuracy.report_row(run, score)
    assert accuracy.markdown_table([row]).splitlines()[2].startswith("| bwa | 600 | 600 |")


def test_benchlib_scores_pairs_like_accuracy(tmp_path, monkeypatch):
    """benchlib's parallel per-region scoring (paired.py) agrees with accuracy.score_records."""
    if shutil.which("bwa") is None:
        pytest.skip("bwa is not on PATH")
    pytest.importorskip("psutil")
    monkeypatch.syspath_prepend(str(BENCH))
    import benchlib

    ref, r1, r2 = tmp_path / "ref.fa", tmp_path / "r1.fq.gz", tmp_path / "r2.fq.gz"
    write_random_genome(ref, {"one": 30_000, "two:b": 20_000})
    simulate_pairs(ref, r1, r2, 200)
    run = accuracy.run_bwa(ref, [r1, r2], tmp_path, threads=1)
    bam = tmp_path / "bwa.bam"
    pysam.sort("-o", str(bam), str(run.alignments))
    pysam.index(str(bam))

    expected = accuracy.score_alignment_file(bam, accuracy.read_names_of(r1, r2), 5)
    got = benchlib.score_bams({"bwa": bam}, 200, threads=2, paired=True)["bwa"]
    fields = ("reads_in", "primary", "mapped", "correct", "mapq20", "mapq20_correct", "proper",
              "mate_primary", "mate_correct", "missing", "duplicated", "unknown")
    assert {f: getattr(got, f) for f in fields} == {f: getattr(expected, f) for f in fields}
    assert benchlib.score_dict(got)["properly_paired_pct"] > 95
