"""bam/markdup.py: duplicates flagged as the sorted BAM is written (`gpualign map --markdup`).

Simulated reads with known PCR duplicates (copies of a read or a fragment with fresh base qualities,
some with their 5' bases replaced so that the copy is soft-clipped there, some with equal qualities
to exercise ties), reverse strands, reads and mates that cannot map: gpualign's flagged set equals
tests/naive.py's plain reference exactly, at any batch size and thread count; it agrees with
`samtools markdup` (after `samtools fixmate -m`) and Picard MarkDuplicates within 0.1% of reads, each
difference explained (skipped where a tool is missing)."""

import os
import shutil
import stat
import subprocess
import zlib
from pathlib import Path

import numpy as np
import pysam
import pytest

from gpualign.bam.markdup import decide, estimate_library_size, read_metrics
from gpualign.bam.optical import read_location
from gpualign.bam.records import D_COLS, D_END, D_FIRST, D_FLAGS, D_MATE, D_SCORE
from gpualign.cli import get_argument_parser, main, run_map
from gpualign.errors import InputError
from gpualign.options import TUNING
from helpers import COMP, write_fastq
from naive import naive_duplicates

LENGTH = 100


def random_seq(rng, n):
    return "".join(rng.choice(list("ACGT"), size=n))


def mutated(rng, s, rate=0.01):
    return "".join("ACGT"[rng.integers(4)] if rng.random() < rate else c for c in s)


def quals(rng, n):
    return bytes((rng.integers(2, 41, size=n) + 33).astype(np.uint8))


def dup_copies(rng, dup_rate, ties, optical=0.0):
    """How many PCR copies a molecule gets (0 mostly), and how each copy is made."""
    copies = int(rng.geometric(0.5)) if rng.random() < dup_rate else 0
    return [(rng.random() < 0.25,              # 5' end replaced: soft-clipped in the copy
             ties and rng.random() < 0.3,       # same qualities as the original: a tie
             rng.random() < optical)            # a cluster beside the original's on its tile
            for _ in range(copies)]


class IlluminaNames:
    """Unique read names INSTRUMENT:RUN:FLOWCELL:LANE:TILE:X:Y; a name `near` another lies on its
    tile within 60 pixels (an optical duplicate at Picard's distance of 100)."""

    def __init__(self, rng):
        self.rng, self.used = rng, set()

    def __call__(self, near=None):
        while True:
            if near is None:
                place = (int(self.rng.integers(1101, 1105)), *map(int, self.rng.integers(0, 30000, size=2)))
            else:
                dx, dy = map(int, self.rng.integers(-60, 61, size=2))
                place = (near[0], max(0, near[1] + dx), max(0, near[2] + dy))
            if place not in self.used:
                self.used.add(place)
                return place, b"SIM:1:FC0:1:%d:%d:%d" % place


def simulate(rng, seqs, n, paired, dup_rate=0.04, ties=False, garbage=0.03, optical=0.0):
    """FASTQ records (one list, or R1 and R2 lists) of n molecules plus their PCR copies. With
    optical, reads get Illumina names and that share of the copies lie beside their original."""
    names = IlluminaNames(rng) if optical else None
    r1, r2 = [], []
    for i in range(n):
        c = int(rng.integers(len(seqs)))
        size = int(rng.normal(300, 30)) if paired else LENGTH
        p = int(rng.integers(0, len(seqs[c]) - size))
        left = seqs[c][p:p + LENGTH]
        right = seqs[c][p + size - LENGTH:p + size].translate(COMP)[::-1]
        if rng.random() < 0.5:
            left, right = right, left
        if not paired and rng.random() < 0.5:
            left = left.translate(COMP)[::-1]
        mates = [mutated(rng, left), mutated(rng, right)][:2 if paired else 1]
        if rng.random() < garbage:                       # a read (or R2) that cannot map
            mates[-1] = random_seq(rng, LENGTH)
        q = [quals(rng, LENGTH) for _ in mates]
        origin = None   # the original's place on the flow cell
        for k, (clip, tie, beside) in enumerate([(False, False, False)] + dup_copies(rng, dup_rate, ties, optical)):
            if names is None:
                name = f"m{i}_{k}".encode()
            else:
                place, name = names(origin if beside else None)
                origin = origin or place
            for m, out in zip(range(len(mates)), (r1, r2)):
                s = mates[m] if k == 0 else mutated(rng, mates[m])
                if clip and m == 0:
                    s = random_seq(rng, 12) + s[12:]
                out.append((name, s.encode(), q[m] if tie or k == 0 else quals(rng, LENGTH)))
    order = rng.permutation(len(r1))                      # copies scattered through the input
    return [[r[j] for j in order] for r in ((r1, r2) if paired else (r1,))]


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """A random three-contig genome and its index (k=10)."""
    rng = np.random.default_rng(1717)
    folder = tmp_path_factory.mktemp("markdup")
    seqs = [random_seq(rng, n) for n in (30000, 20000, 8000)]
    fa = folder / "genome.fa"
    fa.write_text("".join(f">c{i}\n{s}\n" for i, s in enumerate(seqs)))
    prefix = str(folder / "ref")
    assert main(["index", str(fa), "-p", prefix, "-k", "10"]) == 0
    return folder, seqs, prefix


def reads_files(world, name, paired, **kw):
    folder, seqs, _ = world
    rng = np.random.default_rng(zlib.crc32(f"{name} {paired}".encode()))   # the same reads in every process
    files = []
    for m, recs in enumerate(simulate(rng, seqs, 1200 if paired else 2500, paired, **kw)):
        files.append(str(folder / f"{name}_{m + 1}.fq"))
        write_fastq(files[-1], *zip(*recs))
    return files


def mapped(world, files, out, *extra):
    assert main(["map", world[2], *files, "-o", str(out), "--backend", "cpu", *extra]) == 0
    with pysam.AlignmentFile(str(out)) as fh:
        return list(fh)


def flagged(records):
    return {(r.query_name, r.is_read1) for r in records if r.is_duplicate}


@pytest.mark.parametrize("paired", [False, True], ids=["single", "paired"])
def test_flags_equal_the_naive_reference_at_any_batch_size(world, tmp_path, paired):
    files = reads_files(world, "ties", paired, ties=True, dup_rate=0.08, garbage=0.1)
    base = mapped(world, files, tmp_path / "plain.bam", "-t", "2")
    assert not flagged(base)
    expected = naive_duplicates(base)
    dups = {n for n, _ in expected}
    assert len(dups) > 40 and any(not r.is_unmapped and r.cigartuples[0][0] == 4 and r.query_name in dups
                                  for r in base)   # soft-clipped duplicates are there
    if paired:   # fragments whose mate is unmapped, flagged among themselves
        assert sum(r.mate_is_unmapped for r in base if (r.query_name, r.is_read1) in expected) >= 2
    runs = {}
    for extra in (["-t", "2"], ["-t", "1", "--batch-size", "300"], ["-t", "2", "--batch-size", "1000"]):
        out = tmp_path / f"md{len(runs)}.bam"
        recs = mapped(world, files, out, "--markdup", "--markdup-metrics", str(out) + ".txt", *extra)
        runs[tuple(extra)] = flagged(recs)
        assert not any(r.is_duplicate and r.is_unmapped for r in recs)
        for r in recs:   # the same records, only 0x400 added
            r.flag &= ~0x400
        assert [r.to_string() for r in recs] == [r.to_string() for r in base]
    for got in runs.values():
        assert got == expected
    text = (tmp_path / "md0.bam.txt").read_text()
    row = dict(zip(*[line.split("\t") for line in text.split("\n") if line.startswith(("LIBRARY", "Unknown"))]))
    single = [r for r in base if not r.is_unmapped and (not r.is_paired or r.mate_is_unmapped)]
    assert int(row["UNPAIRED_READ_DUPLICATES"]) == sum((r.query_name, r.is_read1) in expected for r in single)
    assert int(row["READ_PAIR_DUPLICATES"]) * 2 + int(row["UNPAIRED_READ_DUPLICATES"]) == len(expected)
    assert int(row["UNMAPPED_READS"]) == sum(r.is_unmapped for r in base)


def test_decide_pairs_win_and_ties_go_to_the_first_record():
    """Hand-made rows: a pair and a fragment at one end (the fragment flagged), two fragments of
    equal score (the one written first kept), a lower-scoring pair flagged with its mate."""
    d = np.full((8, D_COLS), -1, dtype=np.int64)
    d[:, D_FLAGS] = 0
    end = lambda pos, rev=0: (pos << 1) | rev  # noqa: E731
    # rows 0,1: a pair (ends 100+, 400-), score 50; rows 2,3: the same ends, score 40
    for a, s in ((0, 50), (2, 40)):
        d[a, :5] = [end(100), end(400, 1), s, 10, 0]
        d[a + 1, :5] = [end(400, 1), end(100), s, 10, 1]
    d[4, :5] = [end(100), -1, 99, 12, 0]      # a fragment at the pair's end: flagged despite its score
    d[6, :5] = [end(700), -1, 30, 20, 0]      # two fragments of equal score: the first written kept
    d[7, :5] = [end(700), -1, 30, 19, 0]
    dup, optical = decide(d, mate=np.array([1, 0, 3, 2, 5, 4, 7, 6]))
    assert dup.tolist() == [False, False, True, True, True, False, True, False]
    assert not optical.any()
    d[2:4, D_SCORE] = 50                  # now a tie: the pair written first (sort key 10, row 0) kept
    d[0:2, D_FIRST] = 11
    assert decide(d, mate=np.array([1, 0, 3, 2, 5, 4, 7, 6]))[0][:4].tolist() == [True, True, False, False]
    assert d[5, D_END] == -1 and d[5, D_MATE] == -1


def test_library_size_as_picard():
    assert estimate_library_size(1000, 1000) is None
    size = estimate_library_size(2000, 1000)
    assert abs(1000 / size - (1 - np.exp(-2000 / size))) < 1e-6


def marked_by(tool, bam, tmp_path, distance=0):
    """The flagged set of `samtools markdup` (after name sort, fixmate -m, sort; -d distance when
    given) or Picard (OPTICAL_DUPLICATE_PIXEL_DISTANCE=distance, 100 by default), and the path of
    the tool's counts (samtools markdup -f, Picard's metrics)."""
    if tool == "samtools":
        optical = f"-d {distance} " if distance else ""
        subprocess.run(f"samtools sort -n -o {tmp_path}/n.bam {bam} && samtools fixmate -m {tmp_path}/n.bam "
                       f"{tmp_path}/f.bam && samtools sort -o {tmp_path}/s.bam {tmp_path}/f.bam && "
                       f"samtools markdup {optical}-f {tmp_path}/t.txt {tmp_path}/s.bam {tmp_path}/t.bam",
                       shell=True, check=True, capture_output=True)
        out, counts = tmp_path / "t.bam", tmp_path / "t.txt"
    else:
        optical = [f"OPTICAL_DUPLICATE_PIXEL_DISTANCE={distance}"] if distance else []
        proc = subprocess.run(["PicardCommandLine", "MarkDuplicates", f"I={bam}", f"O={tmp_path}/p.bam",
                               f"M={tmp_path}/p.txt", "VALIDATION_STRINGENCY=SILENT", *optical], capture_output=True,
                              text=True, timeout=600)
        assert proc.returncode == 0, proc.stderr[-3000:]
        out, counts = tmp_path / "p.bam", tmp_path / "p.txt"
    with pysam.AlignmentFile(str(out)) as fh:
        return flagged(fh), counts


def samtools_count(path, name):
    """A count from `samtools markdup -f`'s text ("DUPLICATE PAIR OPTICAL: 12")."""
    for line in Path(path).read_text().splitlines():
        if line.startswith(name + ":"):
            return int(line.split(":")[1])
    raise AssertionError(f"{name} not in {path}")


TOOLS = [pytest.param("samtools", marks=pytest.mark.skipif(shutil.which("samtools") is None,
                                                          reason="samtools not installed")),
         pytest.param("picard", marks=pytest.mark.skipif(shutil.which("PicardCommandLine") is None,
                                                        reason="Picard (Debian picard-tools) not installed"))]


@pytest.mark.parametrize("tool", TOOLS)
@pytest.mark.parametrize("paired", [False, True], ids=["single", "paired"])
def test_agrees_with_samtools_markdup_and_picard(world, tmp_path, tool, paired):
    """No ties of quality here (fresh qualities for every copy): the tools and gpualign differ only
    where their rules do, within 0.1% of the reads."""
    files = reads_files(world, "tools", paired)
    plain = tmp_path / "plain.bam"
    base = mapped(world, files, plain, "-t", "2")
    ours = flagged(mapped(world, files, tmp_path / "md.bam", "-t", "2", "--markdup"))
    theirs, _ = marked_by(tool, plain, tmp_path)
    print(f"{tool}: {len(base)} reads, gpualign {len(ours)} flagged, {tool} {len(theirs)}, "
          f"only gpualign {len(ours - theirs)}, only {tool} {len(theirs - ours)}")
    assert len(ours) > 0.02 * len(base)
    assert len(ours ^ theirs) <= 0.001 * len(base)


def test_metrics_into_a_fifo_are_written_in_place_and_bad_paths_refused(world, tmp_path):
    """--markdup-metrics is an output like -o: a FIFO gets the metrics written into it and stays a FIFO
    (never renamed over); the output itself, an input or a folder is refused in one line."""
    files = reads_files(world, "fifo", False, ties=True, dup_rate=0.08, garbage=0.1)
    fifo = tmp_path / "metrics.fifo"
    os.mkfifo(fifo)
    with open(tmp_path / "copy.txt", "wb") as sink:
        reader = subprocess.Popen(["cat", str(fifo)], stdout=sink)
        mapped(world, files, tmp_path / "m.bam", "--markdup", "--markdup-metrics", str(fifo))
        assert reader.wait(60) == 0
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    assert "## METRICS CLASS\tpicard.sam.DuplicationMetrics" in (tmp_path / "copy.txt").read_text()
    for bad, why in ((tmp_path / "m.bam", "is the output or its index"), (tmp_path, "is a directory"),
                     (files[0], "is also an input")):
        argv = ["map", world[2], *files, "-o", str(tmp_path / "m.bam"), "--backend", "cpu", "--markdup",
                "--markdup-metrics", str(bad)]
        with pytest.raises(InputError, match=f"^--markdup-metrics {bad}: {why}"):
            run_map(get_argument_parser().parse_args(argv), lambda msg: None, argv, TUNING)


def unpacked(location):
    return None if location < 0 else (location >> 48, (location >> 24) & 0xFFFFFF, location & 0xFFFFFF)


@pytest.mark.parametrize("name, place", [
    (b"SIM:1:FC0:1:1101:200:300", (1101, 200, 300)),         # 7 fields
    (b"HWUSI-EAS100R:6:73:941:1973#0", (73, 941, 1973)),     # 5 fields; digits up to the first non-digit
    (b"A:B:C:D:1101:12ab:7", (1101, 12, 7)),
    (b"a:1:2:3", None), (b"A:B:C:D:E:F:1101:1:2", None),     # 4 and 9 fields
    (b"m1_2", None), (b"A:B:C:1:x:2:3", None), (b"A:B:C:D::2:3", None),   # no digits in a field
    (b":B:C:D:1101:1:2", None),                              # a leading ':' is Picard's 6th field, not a 7th
    (b"A:B:C:D:1101:-5:2", None),                            # negative: not kept here (none on Illumina)
])
def test_read_location_as_picard_parses_names(name, place):
    buf = np.frombuffer(b"xx" + name + b"yy", dtype=np.uint8)
    assert unpacked(read_location(buf, 2, 2 + len(name))) == place


@pytest.mark.parametrize("tool", TOOLS)
def test_optical_duplicates_counted_as_picard_and_samtools(world, tmp_path, tool):
    """Pairs with Illumina names, half the PCR copies beside their original on its tile: the same
    flags as without optical counting, and the optical count, duplicates and library size equal
    Picard's (OPTICAL_DUPLICATE_PIXEL_DISTANCE=100). samtools markdup -d 100 counts reads (two a
    pair) and does not chain: a copy within the distance of another copy, but not of the pair it
    is compared with, is optical to Picard and gpualign and not to samtools (one pair here), so
    its count may only be lower, by a few."""
    files = reads_files(world, "optical", True, dup_rate=0.15, optical=0.5)
    plain = tmp_path / "plain.bam"
    mapped(world, files, plain, "-t", "2")
    metrics = tmp_path / "md.txt"
    ours = flagged(mapped(world, files, tmp_path / "md.bam", "-t", "2", "--markdup", "--optical-distance", "100",
                          "--markdup-metrics", str(metrics)))
    assert ours == flagged(mapped(world, files, tmp_path / "md0.bam", "-t", "2", "--markdup"))
    (ours_m,) = read_metrics(metrics).values()
    assert ours_m["READ_PAIR_OPTICAL_DUPLICATES"] > 20
    assert "OPTICAL_DUPLICATE_PIXEL_DISTANCE=100" in metrics.read_text()
    theirs, counts = marked_by(tool, plain, tmp_path, distance=100)
    assert len(ours ^ theirs) <= 0.001 * len(ours)
    if tool == "picard":
        (picard,) = read_metrics(counts).values()
        for column in ("READ_PAIRS_EXAMINED", "READ_PAIR_DUPLICATES", "READ_PAIR_OPTICAL_DUPLICATES",
                       "ESTIMATED_LIBRARY_SIZE"):
            assert ours_m[column] == picard[column], column
    else:
        pairs = samtools_count(counts, "DUPLICATE PAIR OPTICAL") // 2
        assert 0 <= ours_m["READ_PAIR_OPTICAL_DUPLICATES"] - pairs <= 0.02 * pairs


def test_optical_distance_needs_markdup_and_a_count(world, tmp_path):
    argv = ["map", world[2], "x.fq", "-o", str(tmp_path / "m.bam"), "--optical-distance", "100"]
    files = reads_files(world, "tiny", False, dup_rate=0.0)
    argv[2] = files[0]
    with pytest.raises(InputError, match="^--optical-distance: give --markdup too"):
        run_map(get_argument_parser().parse_args(argv), lambda msg: None, argv, TUNING)
    with pytest.raises(SystemExit):
        get_argument_parser().parse_args(argv[:-1] + ["-1", "--markdup"])


@pytest.mark.skipif(shutil.which("PicardCommandLine") is None, reason="Picard (Debian picard-tools) not installed")
@pytest.mark.parametrize("paired", [False, True], ids=["single", "paired"])
def test_ties_go_as_picard_by_the_names_flow_cell_place(world, tmp_path, paired):
    """Copies that share their original's qualities (ties) under Illumina names: Picard keeps the
    lowest tile:x:y, whatever the file order, and so does gpualign: the flagged sets are equal."""
    files = reads_files(world, "tie_names", paired, ties=True, dup_rate=0.12, optical=0.2)
    plain = tmp_path / "plain.bam"
    base = mapped(world, files, plain, "-t", "2")
    ours = flagged(mapped(world, files, tmp_path / "md.bam", "-t", "2", "--markdup"))
    assert ours == naive_duplicates(base)
    theirs, _ = marked_by("picard", plain, tmp_path)
    assert ours == theirs
