"""gpualign.bam.stats: statistics of a small BAM written here with pysam."""

from pathlib import Path

import pysam
import pytest

from gpualign.bam.stats import SUMMARY_COLUMNS, summarize, write_stats
from naive import naive_bam_summary

CONTIGS = [("chrA", 1000), ("chrB", 500)]


def _record(header, name, rid, pos, mapq=60, flag=0):
    rec = pysam.AlignedSegment(header)
    rec.query_name = name
    rec.query_sequence = "ACGTACGTAC"
    rec.query_qualities = pysam.qualitystring_to_array("IIIIIIIIII")
    rec.flag = flag
    if flag & 4:
        rec.reference_id, rec.reference_start, rec.mapping_quality = -1, -1, 0
    else:
        rec.reference_id, rec.reference_start = rid, pos
        rec.mapping_quality = mapq
        rec.cigartuples = [(0, 10)]
    return rec


def sort_and_index(unsorted: str, out: str):
    pysam.sort("-o", out, unsorted)
    pysam.index(out)


@pytest.fixture
def unsorted_bam(tmp_path):
    """Eight records in read order: six primary mapped (two with MAPQ < 20), one unmapped,
    one secondary."""
    path = str(tmp_path / "reads.unsorted.bam")
    header = pysam.AlignmentHeader.from_dict({
        "HD": {"VN": "1.6", "SO": "unsorted"},
        "SQ": [{"SN": n, "LN": ln} for n, ln in CONTIGS],
        "RG": [{"ID": "s1", "SM": "s1", "PL": "ILLUMINA"}],
        "PG": [{"ID": "gpualign", "PN": "gpualign", "CL": "test"}],
    })
    records = [
        _record(header, "r1", 1, 300),
        _record(header, "r2", 0, 900, mapq=0),
        _record(header, "r3", 0, 5),
        _record(header, "r4", None, None, flag=4),
        _record(header, "r5", 1, 10, mapq=19),
        _record(header, "r6", 0, 400),
        _record(header, "r7", 0, 100),
        _record(header, "r6", 1, 200, mapq=0, flag=0x100),
    ]
    with pysam.AlignmentFile(path, "wb", header=header) as out:
        for rec in records:
            out.write(rec)
    return path


def test_summarize_counts_primary_records(unsorted_bam):
    assert summarize(unsorted_bam) == {
        "records": 8, "primary": 7, "mapped": 6, "mapped_pct": 85.71, "mapq_ge_20": 4,
    }


def test_summarize_equals_the_record_by_record_count(tmp_path, rng):
    """samtools' passes (flagstat, view -c) count what a Python loop over the records counts, with
    secondary, supplementary, duplicate, QC-failed and unmapped records of any MAPQ among them."""
    header = pysam.AlignmentHeader.from_dict({"HD": {"VN": "1.6"}, "SQ": [{"SN": n, "LN": ln} for n, ln in CONTIGS]})
    flags = [0, 16, 4, 0x100, 0x800, 0x400, 0x200, 0x400 | 16, 99, 147, 0x200 | 4]
    path = str(tmp_path / "mixed.bam")
    with pysam.AlignmentFile(path, "wb", header=header) as out:
        for i in range(300):
            flag = int(rng.choice(flags))
            out.write(_record(header, f"r{i}", int(rng.integers(2)), int(rng.integers(400)),
                              mapq=int(rng.integers(61)), flag=flag))
    assert summarize(path) == naive_bam_summary(path)


def test_write_stats(unsorted_bam, tmp_path):
    bam = str(tmp_path / "s1.bam")
    sort_and_index(unsorted_bam, bam)
    paths = [str(tmp_path / f) for f in ("s1.flagstat.txt", "s1.idxstats.txt", "s1.summary.tsv")]
    summary = write_stats(bam, *paths, sample="s1", samtools_stats_path=str(tmp_path / "s1.stats.txt"))
    assert summary["primary"] == 7
    stats = Path(tmp_path / "s1.stats.txt").read_text()
    assert stats.startswith("# This file was produced by samtools stats")   # what MultiQC looks for
    numbers = dict(line.split("\t")[1:3] for line in stats.splitlines() if line.startswith("SN\t"))
    assert numbers["raw total sequences:"] == "7" and numbers["reads mapped:"] == "6"
    flagstat = Path(paths[0]).read_text()
    assert "8 + 0 in total" in flagstat
    assert "1 + 0 secondary" in flagstat
    idxstats = [line.split("\t") for line in Path(paths[1]).read_text().splitlines()]
    assert idxstats == [["chrA", "1000", "4", "0"], ["chrB", "500", "3", "0"], ["*", "0", "0", "1"]]
    header, row = [line.split("\t") for line in Path(paths[2]).read_text().splitlines()]
    assert header == ["sample", *SUMMARY_COLUMNS]
    assert row == ["s1", "8", "7", "6", "85.71", "4"]


def test_write_stats_without_sample_column(unsorted_bam, tmp_path):
    bam = str(tmp_path / "s1.bam")
    sort_and_index(unsorted_bam, bam)
    summary_path = str(tmp_path / "summary.tsv")
    write_stats(bam, str(tmp_path / "f.txt"), str(tmp_path / "i.txt"), summary_path)
    assert Path(summary_path).read_text().splitlines()[0].split("\t") == list(SUMMARY_COLUMNS)


def test_write_stats_of_an_empty_bam(tmp_path):
    path = str(tmp_path / "empty.bam")
    header = pysam.AlignmentHeader.from_dict({"HD": {"VN": "1.6"}, "SQ": [{"SN": "c", "LN": 10}]})
    with pysam.AlignmentFile(path, "wb", header=header):
        pass
    sorted_bam = str(tmp_path / "sorted.bam")
    sort_and_index(path, sorted_bam)
    summary = write_stats(sorted_bam, str(tmp_path / "f"), str(tmp_path / "i"), str(tmp_path / "s"))
    assert summary == {"records": 0, "primary": 0, "mapped": 0, "mapped_pct": 0.0, "mapq_ge_20": 0}
