"""bam/merge.py: sorted BAMs merged into one, duplicates marked across them on the way out (the
workflow's merge of a unit's chunks and of a sample's units).

Simulated reads with PCR duplicates (test_bam_markdup's), split into units mapped on their own with
their own read groups: merged with marking, the flagged set equals tests/naive.py's (by library)
and agrees with `samtools markdup` and Picard MarkDuplicates on the same merged records, for units
of one library and of two; a single run's marking is reproduced by its pieces merged, whatever
input the mates of a pair are in; bad inputs are one line."""

import gzip
import os
import shutil
import struct

import numpy as np
import pysam
import pytest

from gpualign.bam.bgzf import BGZF_EOF, sized_bgzf_blocks
from gpualign.bam.markdup import read_metrics
from gpualign.errors import InputError
from gpualign.workflow.chunks import merge_sorted_bams
from naive import naive_duplicates
from test_bam_markdup import TOOLS, flagged, mapped, marked_by, reads_files, world  # noqa: F401 (a fixture)

UNITS = {"one": {"u1": "lib1", "u2": "lib1", "u3": "lib1"},   # read group -> library
         "two": {"u1": "lib1", "u2": "lib1", "u3": "lib2"}}


def fastq_records(path):
    with open(path) as fh:
        lines = fh.read().splitlines()
    return [lines[i:i + 4] for i in range(0, len(lines), 4)]


def split_units(files, tmp_path, parts):
    """The reads (and mates) cut into `parts` units of consecutive records (whole pairs)."""
    records = [fastq_records(f) for f in files]
    n = len(records[0])
    units = []
    for u in range(parts):
        lo, hi = u * n // parts, (u + 1) * n // parts
        unit = []
        for m, recs in enumerate(records):
            path = tmp_path / f"unit{u}_{m + 1}.fq"
            path.write_text("".join("\n".join(r) + "\n" for r in recs[lo:hi]))
            unit.append(str(path))
        units.append(unit)
    return units


def unit_bams(world, files, tmp_path, libraries, *extra):
    """Each unit mapped on its own (read group ID u1.., its library's LB), unmarked."""
    bams = []
    for (rg, lib), unit in zip(libraries.items(), split_units(files, tmp_path, len(libraries))):
        bams.append(str(tmp_path / f"{rg}.bam"))
        mapped(world, unit, bams[-1], "-t", "2", "-R", f"@RG\\tID:{rg}\\tSM:s\\tLB:{lib}", *extra)
    return bams


def sample_header(bams):
    header = None
    for bam in bams:
        with pysam.AlignmentFile(bam) as fh:
            h = fh.header.to_dict()
        header = header or dict(h, RG=[], PG=h["PG"][:1])
        header["RG"] += h["RG"]
    return header


@pytest.mark.parametrize("libraries", ["one", "two"])
@pytest.mark.parametrize("paired", [False, True], ids=["single", "paired"])
def test_units_marked_at_the_merge_by_library_as_the_references(world, tmp_path, paired, libraries):
    """Three units of one library, or two of lib1 and one of lib2: the merge marks what naive.py
    marks over the sample by library (duplicates across units of a library; none across
    libraries), and the metrics count each library's."""
    files = reads_files(world, "units", paired, dup_rate=0.08)
    bams = unit_bams(world, files, tmp_path, UNITS[libraries])
    header = sample_header(bams)
    out, metrics = tmp_path / "sample.bam", tmp_path / "sample.txt"
    summary = merge_sorted_bams(bams, str(out), threads=2, header=header, what="unit", markdup=True,
                                metrics=str(metrics))
    with pysam.AlignmentFile(str(out)) as fh:
        records = list(fh)
    expected = naive_duplicates(records, UNITS[libraries])
    assert flagged(records) == expected
    assert summary["unmatched"] == 0 and len(records) == summary["records"]
    rows = read_metrics(metrics)
    assert sorted(rows) == sorted(set(UNITS[libraries].values()))
    assert sum(r["UNPAIRED_READ_DUPLICATES"] + 2 * r["READ_PAIR_DUPLICATES"] for r in rows.values()) == len(expected)
    whole = naive_duplicates(records)   # one library for all: lib2's copies of lib1's reads count too
    assert (whole == expected) == (libraries == "one")


@pytest.mark.parametrize("tool", TOOLS)
@pytest.mark.parametrize("libraries", ["one", "two"])
def test_units_merged_and_marked_agree_with_samtools_and_picard(world, tmp_path, tool, libraries):
    """The references mark the units merged without marking; gpualign's flags differ only where
    their rules do (within 0.1% of the reads; none on these reads). samtools markdup (1.16) does
    not keep libraries apart: with two, it also flags lib2's copies of lib1's fragments, which is
    what naive.py marks when every read group is one library."""
    files = reads_files(world, "units_tools", True, dup_rate=0.06)
    bams = unit_bams(world, files, tmp_path, UNITS[libraries])
    header = sample_header(bams)
    plain, ours = tmp_path / "plain.bam", tmp_path / "ours.bam"
    merge_sorted_bams(bams, str(plain), threads=2, header=header, what="unit")
    merge_sorted_bams(bams, str(ours), threads=2, header=header, what="unit", markdup=True)
    with pysam.AlignmentFile(str(ours)) as fh:
        records = list(fh)
    got = flagged(records)
    theirs, _ = marked_by(tool, plain, tmp_path)
    if tool == "samtools" and libraries == "two":   # theirs: ours and the copies across libraries
        cross = naive_duplicates(records) - naive_duplicates(records, UNITS[libraries])
        assert cross and got.isdisjoint(cross)
        got |= cross
    print(f"{tool}: {len(records)} records, gpualign {len(got)} flagged, {tool} {len(theirs)}, "
          f"only gpualign {len(got - theirs)}, only {tool} {len(theirs - got)}")
    assert len(got) > 0.02 * len(records)
    assert len(got ^ theirs) <= 0.001 * len(records)


@pytest.mark.parametrize("paired", [False, True], ids=["single", "paired"])
def test_marks_of_one_run_equal_its_pieces_merged(world, tmp_path, paired):
    """One --markdup run against its records cut into three sorted BAMs by position (records at
    one sort key stay together, in order, so the merge puts them back in the run's order; mates
    mostly fall in different pieces, which chunks never do) and merged with marking: the same
    records, flags (ties of score included) and metrics. Optical counting on."""
    files = reads_files(world, "pieces", paired, ties=True, dup_rate=0.1, garbage=0.05, optical=0.4)
    marked, metrics = tmp_path / "marked.bam", tmp_path / "marked.txt"
    expected = mapped(world, files, marked, "-t", "2", "--markdup", "--optical-distance", "100",
                      "--markdup-metrics", str(metrics))
    pieces = [str(tmp_path / f"piece{p}.bam") for p in range(3)]
    with pysam.AlignmentFile(str(marked)) as fh:
        outs = [pysam.AlignmentFile(path, "wb", template=fh) for path in pieces]
        for rec in fh:
            rec.flag &= ~0x400   # the merge decides afresh
            outs[(rec.reference_id * 7919 + rec.reference_start * 2 + rec.is_reverse) % 3].write(rec)
        for out in outs:
            out.close()
    merged, merged_metrics = tmp_path / "merged.bam", tmp_path / "merged.txt"
    summary = merge_sorted_bams(pieces, str(merged), threads=2, markdup=True, optical_distance=100,
                                metrics=str(merged_metrics))
    with pysam.AlignmentFile(str(merged)) as fh:
        assert [r.to_string() for r in fh] == [r.to_string() for r in expected]
    assert read_metrics(merged_metrics) == read_metrics(metrics)
    (counts,) = summary["metrics"].values()
    assert counts["READ_PAIR_OPTICAL_DUPLICATES"] > (10 if paired else -1)
    assert summary["unmatched"] == 0


def test_merge_keeps_flags_without_marking_and_clears_stale_ones_with_it(world, tmp_path):
    files = reads_files(world, "stale", False, dup_rate=0.1)
    marked = tmp_path / "marked.bam"
    expected = flagged(mapped(world, files, marked, "-t", "2", "--markdup"))
    kept = tmp_path / "kept.bam"
    merge_sorted_bams([str(marked)], str(kept))
    assert flagged(pysam.AlignmentFile(str(kept))) == expected
    stale = tmp_path / "stale.bam"   # every mapped read flagged: marking must clear what is not a duplicate
    with pysam.AlignmentFile(str(marked)) as fh, pysam.AlignmentFile(str(stale), "wb", template=fh) as out:
        for rec in fh:
            rec.flag |= 0x400
            out.write(rec)
    remarked = tmp_path / "remarked.bam"
    merge_sorted_bams([str(stale)], str(remarked), markdup=True)
    assert flagged(pysam.AlignmentFile(str(remarked))) == expected


def test_bad_inputs_are_one_line_and_leave_nothing(world, tmp_path):
    files = reads_files(world, "bad", False, dup_rate=0.0)
    good = tmp_path / "good.bam"
    records = mapped(world, files, good, "-t", "2")
    unsorted = tmp_path / "unsorted.bam"
    with pysam.AlignmentFile(str(good)) as fh, pysam.AlignmentFile(str(unsorted), "wb", template=fh) as out:
        for rec in reversed([r for r in records if not r.is_unmapped]):
            out.write(rec)
    cut = tmp_path / "cut.bam"
    cut.write_bytes(good.read_bytes()[:-1000])
    junk = tmp_path / "junk.bam"
    junk.write_bytes(gzip.compress(b"not a BAM"))
    bad_record = tmp_path / "bad_record.bam"   # the 3rd record's block_size too small for its fields
    data = bytearray(gzip.decompress(good.read_bytes()))
    at = struct.unpack_from("<i", data, 4)[0] + 12   # after magic, l_text, text, n_ref
    for _ in range(struct.unpack_from("<i", data, at - 4)[0]):
        at += 8 + struct.unpack_from("<i", data, at)[0]
    for _ in range(2):
        at += 4 + struct.unpack_from("<i", data, at)[0]
    struct.pack_into("<i", data, at, 40)
    blocks, _, _ = sized_bgzf_blocks(np.frombuffer(bytes(data), dtype=np.uint8), 1)
    bad_record.write_bytes(bytes(blocks) + BGZF_EOF)
    other = tmp_path / "other.bam"
    with pysam.AlignmentFile(str(other), "wb", reference_names=["x"], reference_lengths=[10]):
        pass
    out = tmp_path / "out" / "m.bam"
    for bad, why in ((unsorted, "not coordinate-sorted"), (cut, "not BGZF \\(or truncated\\)"),
                     (bad_record, "record 3 is malformed or cut short"),
                     (junk, "not BGZF"), (other, "its references \\(@SQ\\) differ")):
        inputs = [str(good), str(bad)]
        with pytest.raises(InputError, match=f"^merging 2 chunk BAMs into {out}: BAM {bad}: {why}"):
            merge_sorted_bams(inputs, str(out), markdup=True, metrics=str(tmp_path / "out" / "m.txt"))
        assert os.listdir(out.parent) == []
    shutil.rmtree(out.parent)
