"""gpualign.qc.samtools and qc.coverage: samtools' reports of a BAM of known content, read back."""

import numpy as np
import pysam
import pytest

from gpualign.errors import InputError
from gpualign.qc.coverage import bin_size, binned_depth, bins, read_coverage, write_coverage
from gpualign.qc.samtools import (bases_per_cycle, duplication, error_rates, insert_sizes, mapq_histogram,
                                  parse_flagstat, parse_stats, summary_numbers)

from helpers import QC_READ_LENGTH, known_bam_stats

MAPPED = 12   # of the known BAM's 13 reads (one unmapped)


@pytest.fixture
def known(tmp_path, rng):
    """(samtools stats sections, flagstat counts, bam, fasta, mapped records) of helpers' known BAM."""
    return known_bam_stats(tmp_path, rng)


def test_mapq_histogram_counts_primary_mapped_reads_that_are_not_duplicates(known):
    mapq, counts = mapq_histogram(known[0])
    assert list(mapq) == list(range(61))
    assert {int(q): int(c) for q, c in zip(mapq, counts) if c} == {0: 2, 17: 1, 60: 8}


def test_insert_sizes_of_the_known_pairs(known):
    sizes, pairs = insert_sizes(known[0])
    assert {int(s): int(p) for s, p in zip(sizes, pairs) if p} == {250: 1, 300: 1}
    assert summary_numbers(known[0])["insert size average"] == 275.0


def test_mismatches_and_indels_fall_at_their_sequencing_cycles(known):
    """f1's 4th base, r1's first base in the record (a reverse read: the last one sequenced), i1's
    insertion after 5 bases, d1's deletion after 5; each once among the 12 mapped reads."""
    rates = error_rates(known[0])
    assert list(rates["cycle"]) == list(range(1, QC_READ_LENGTH + 1))
    assert list(bases_per_cycle(known[0])) == [13] * QC_READ_LENGTH   # every read, the unmapped one too

    def where(rate):
        return {int(c): pytest.approx(float(r)) for c, r in zip(rates["cycle"], rate) if r}

    assert where(rates["mismatch"]) == {4: 1 / MAPPED, 20: 1 / MAPPED}
    assert where(rates["insertion"]) == {6: 1 / MAPPED}
    assert where(rates["deletion"]) == {5: 1 / MAPPED}


def test_without_the_reference_there_are_no_mismatch_rates(known):
    sections = parse_stats(pysam.stats(known[2]))
    assert "MPC" not in sections
    rates = error_rates(sections)
    assert rates["mismatch"] is None and rates["insertion"].sum() == pytest.approx(1 / MAPPED)


def test_duplication_from_flagstat(known):
    assert known[1]["in total"] == 13 and known[1]["primary duplicates"] == 1
    assert duplication(known[1]) == {"primary": 13, "unique": 11, "duplicates": 1, "unmapped": 1,
                                     "rate": pytest.approx(1 / MAPPED)}


def test_reports_that_are_not_samtools_are_one_line_errors():
    with pytest.raises(InputError, match="not samtools stats output"):
        parse_stats("# nothing\nXX\t1\n")
    with pytest.raises(InputError, match="not samtools flagstat output"):
        parse_flagstat("hello\n")


# ---- coverage -----------------------------------------------------------------------------------


@pytest.mark.parametrize("genome, target, size", [
    (48502, 1000, 50), (3000, 30, 100), (5_000_000, 1000, 5000), (3_100_000_000, 1000, 5_000_000), (7, 1000, 1),
    (1001, 1000, 2),
])
def test_bin_size_is_round_and_gives_at_most_the_target(genome, target, size):
    assert bin_size(genome, target) == size
    assert -(-genome // size) <= target


def test_every_contig_gets_bins_the_last_one_shorter():
    assert bins([("a", 250), ("b", 40)], 100) == [("a", 0, 100), ("a", 100, 200), ("a", 200, 250), ("b", 0, 40)]


def test_binned_depth_equals_the_reads_spans(known, tmp_path):
    """Mean depth per 100 bp bin of the reads that are mapped and not duplicates, deletions counted (as
    samtools bedcov does by default), from their reference spans."""
    *_, bam, _, records = known
    depth = {"chrA": np.zeros(2000), "chrB": np.zeros(1000)}
    for name, flag, contig, start, end in records:
        if not flag & 0x400:
            depth[contig][start:end] += 1
    expected = [(c, s, s + 100, depth[c][s:s + 100].mean())
                for c in ("chrA", "chrB") for s in range(0, len(depth[c]), 100)]
    got = binned_depth(bam, target=30)
    assert [(c, s, e) for c, s, e, _ in got] == [(c, s, e) for c, s, e, _ in expected]
    assert [d for *_, d in got] == pytest.approx([d for *_, d in expected])
    assert sum(d for *_, d in got) > 0
    path = str(tmp_path / "coverage.tsv")
    write_coverage(path, got)
    back = read_coverage(path)
    assert [r[:3] for r in back] == [r[:3] for r in got]
    assert [r[3] for r in back] == pytest.approx([d for *_, d in got], rel=1e-3)   # 4 significant digits
