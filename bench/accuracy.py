#!/usr/bin/env python3
"""Score aligners against the truth carried in simulated read names.

Reads come from ``bench/simulate.py`` and are named
``r{num}:{contig}:{pos}:{strand}`` (``pos`` is 1-based and leftmost on the
forward strand), or for pairs ``p{num}:{contig}:{pos1}:{strand1}:{pos2}:{strand2}``
(both mates' truth in one name).  This script runs the peer aligners
(``bwa mem``, ``minimap2 -ax sr``; command lines from ``peers.py``) and optionally our own aligner on the same
reads (two FASTQ files: as pairs), then scores every SAM/BAM with pysam:

* only primary records count (flags 0x100 and 0x800 are skipped);
* a record of a pair (flag 0x40 or 0x80) is scored against its mate's truth;
* a read is *correct* when it is mapped to its true contig and its leftmost
  aligned position, moved left by any leading soft/hard clip, lies within
  ``--tolerance`` bases of the truth;
* every read (each mate of a pair) must appear exactly once as a primary
  record: reads missing, repeated or unknown are counted and reported;
* pairs also report the share of primary records flagged properly paired
  (0x2) and each mate's primary records and correct share.

A TSV (``--out``) and a markdown table (printed last) summarise the runs.
"""
from __future__ import annotations

import argparse
import os
import shlex
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable

import pysam

HERE = str(Path(__file__).resolve().parent)
if HERE not in sys.path:            # also when loaded from its path (the tests)
    sys.path.insert(0, HERE)

import peers  # noqa: E402
from peers import quoted_files  # noqa: E402

# the peers this script runs, and where each one's index goes in the workdir: bwa/ref.*, minimap2.mmi
INDEX_PREFIXES = {"bwa": Path("bwa") / "ref", "minimap2": Path("minimap2")}
PEERS = tuple(INDEX_PREFIXES)
MAPQ_CUTOFF = 20
CLIP_OPS = (pysam.CSOFT_CLIP, pysam.CHARD_CLIP)


# --------------------------------------------------------------------------
# truth and scoring


def is_pair_name(name: str) -> bool:
    """Whether a name has simulate.py's pair form ``p{num}:...`` (five ':' fields at least)."""
    number = name.split(":", 1)[0]
    return number[:1] == "p" and number[1:].isdigit() and name.count(":") >= 5


def parse_truth(name: str, mate: int = 0) -> tuple[str, int]:
    """Return (contig, 1-based leftmost position) from a simulated read name.

    ``mate`` is 0 for a single-end name, 1 or 2 for that mate of a pair name
    (a record of a pair must say which mate it is)."""
    if is_pair_name(name) != bool(mate):
        raise ValueError(f"{name!r} is not a simulated {'pair' if mate else 'single-end'} name")
    if mate:
        head, pos1, strand1, pos2, strand2 = name.rsplit(":", 4)
        pos, strands = (pos1 if mate == 1 else pos2), {strand1, strand2}
    else:
        head, pos, strand = name.rsplit(":", 2)
        strands = {strand}
    _number, contig = head.split(":", 1)
    if strands - {"+", "-"}:
        raise ValueError(f"not a simulated read name: {name!r}")
    return contig, int(pos)


def mate_of(record: pysam.AlignedSegment) -> int:
    """1 or 2 for a paired record's mate (flags 0x40 / 0x80), 0 for single-end."""
    return 1 if record.is_read1 else 2 if record.is_read2 else 0


def read_key(record: pysam.AlignedSegment):
    """What a record stands for: its name, or (name, mate) for a mate of a pair."""
    mate = mate_of(record)
    return (record.query_name, mate) if mate else record.query_name


def clipped_leftmost(record: pysam.AlignedSegment) -> int:
    """1-based leftmost reference position, extended left over leading clips."""
    clip = 0
    for op, length in record.cigartuples or ():
        if op not in CLIP_OPS:
            break
        clip += length
    return record.reference_start + 1 - clip


def is_correct(record: pysam.AlignedSegment, tolerance: int) -> bool:
    """Whether a mapped record lies on the true contig within ``tolerance``."""
    if record.is_unmapped:
        return False
    contig, pos = parse_truth(record.query_name, mate_of(record))
    return record.reference_name == contig and abs(clipped_leftmost(record) - pos) <= tolerance


@dataclass
class Score:
    reads_in: int = 0
    primary: int = 0
    mapped: int = 0
    correct: int = 0
    mapq20: int = 0
    mapq20_correct: int = 0
    missing: int = 0
    duplicated: int = 0
    unknown: int = 0
    # pairs only: primary records flagged properly paired, and per mate (index 0: mate 1)
    paired: bool = False
    proper: int = 0
    mate_primary: list = field(default_factory=lambda: [0, 0])
    mate_correct: list = field(default_factory=lambda: [0, 0])

    @property
    def once_each(self) -> bool:
        return self.missing == 0 and self.duplicated == 0 and self.unknown == 0

    def count_mate(self, mate: int, proper: bool, correct: bool) -> None:
        """Add one primary record of a pair to the pair-only counts."""
        self.proper += proper
        if mate in (1, 2):
            self.mate_primary[mate - 1] += 1
            self.mate_correct[mate - 1] += correct


def score_records(
    records: Iterable[pysam.AlignedSegment], read_names: set, tolerance: int
) -> Score:
    """Score primary records against the truth in their names.

    ``read_names`` holds names, or (name, mate) keys for pairs (``read_names_of``)."""
    score = Score(reads_in=len(read_names), paired=any(isinstance(k, tuple) for k in read_names))
    seen: Counter = Counter()
    for record in records:
        if record.is_secondary or record.is_supplementary:
            continue
        seen[read_key(record)] += 1
        score.primary += 1
        try:
            correct = not record.is_unmapped and is_correct(record, tolerance)
        except ValueError:      # no truth in the name (counted unknown), or a pair's record without 0x40/0x80
            correct = False
        if score.paired:
            score.count_mate(mate_of(record), record.is_proper_pair, correct)
        if record.is_unmapped:
            continue
        score.mapped += 1
        score.correct += correct
        if record.mapping_quality >= MAPQ_CUTOFF:
            score.mapq20 += 1
            score.mapq20_correct += correct
    score.missing = len(read_names - seen.keys())
    score.duplicated = sum(1 for count in seen.values() if count > 1)
    score.unknown = len(seen.keys() - read_names)
    return score


def score_alignment_file(path: Path, read_names: set[str], tolerance: int) -> Score:
    with pysam.AlignmentFile(str(path), check_sq=False) as alignments:
        return score_records(alignments, read_names, tolerance)


def read_names_of(*reads: Path) -> set:
    """Names of one FASTQ, or (name, mate) keys of two (R1, R2)."""
    if len(reads) == 1:
        with pysam.FastxFile(str(reads[0])) as handle:
            return {entry.name for entry in handle}
    keys = set()
    for mate, path in enumerate(reads, start=1):
        with pysam.FastxFile(str(path)) as handle:
            keys.update((entry.name, mate) for entry in handle)
    return keys


# --------------------------------------------------------------------------
# running aligners


@dataclass
class Run:
    aligner: str
    alignments: Path
    index_s: float | None = None
    map_s: float | None = None


def timed(command: str, stdout: Path | None = None) -> float:
    """Run a shell command (stdout optionally to a file); return wall seconds."""
    started = time.perf_counter()
    with open(stdout, "wb") if stdout else open(os.devnull, "wb") as sink:
        result = subprocess.run(command, shell=True, stdout=sink, stderr=subprocess.PIPE)
    if result.returncode != 0:
        tail = result.stderr.decode(errors="replace")[-2000:]
        raise RuntimeError(f"command failed ({result.returncode}): {command}\n{tail}")
    return time.perf_counter() - started


def run_peer(aligner: str, ref: Path, reads, workdir: Path, threads: int) -> Run:
    """The peer's index, then its SAM in workdir (both timed); ``reads`` is one FASTQ or a list of
    two (paired)."""
    prefix, sam = workdir / INDEX_PREFIXES[aligner], workdir / f"{aligner}.sam"
    prefix.parent.mkdir(parents=True, exist_ok=True)
    index_s = timed(peers.index_command(aligner, ref, prefix, threads))
    map_s = timed(peers.map_command(aligner, prefix, reads, threads), stdout=sam)
    return Run(aligner, sam, index_s, map_s)


def run_bwa(ref: Path, reads, workdir: Path, threads: int) -> Run:
    """bwa index + bwa mem."""
    return run_peer("bwa", ref, reads, workdir, threads)


def run_gpualign(args, workdir: Path) -> Run:
    """Run the ``--gpualign-index-cmd`` / ``--gpualign-cmd`` templates.

    Placeholders: {ref} {prefix} {reads} {bam} {threads} {workdir}; values
    are shell-quoted before substitution ({reads} is both files for pairs).
    """
    bam = workdir / "gpualign.bam"
    values = {
        "ref": args.ref, "prefix": workdir / "gpualign_index" / "ref",
        "bam": bam, "threads": args.threads, "workdir": workdir,
    }
    Path(values["prefix"]).parent.mkdir(parents=True, exist_ok=True)
    quoted = {key: shlex.quote(str(value)) for key, value in values.items()}
    quoted["reads"] = quoted_files(args.reads)
    index_s = None
    if args.gpualign_index_cmd:
        index_s = timed(args.gpualign_index_cmd.format(**quoted))
    map_s = timed(args.gpualign_cmd.format(**quoted))
    return Run("gpualign", bam, index_s, map_s)


# --------------------------------------------------------------------------
# reporting

COLUMNS = (
    "aligner", "reads_in", "primary", "mapped_pct", "correct_pct", "mapq20",
    "precision_mapq20_pct", "once_each", "missing", "duplicated", "unknown", "index_s", "map_s",
)
PAIRED_COLUMNS = ("properly_paired_pct", "r1_primary", "r2_primary", "r1_correct_pct", "r2_correct_pct")


def percent(part: int, whole: int) -> float:
    return 100.0 * part / whole if whole else 0.0


def seconds(value: float | None) -> str:
    return "" if value is None else f"{value:.2f}"


def report_row(run: Run, score: Score) -> dict:
    return {
        "aligner": run.aligner,
        "reads_in": score.reads_in,
        "primary": score.primary,
        "mapped_pct": f"{percent(score.mapped, score.reads_in):.2f}",
        "correct_pct": f"{percent(score.correct, score.reads_in):.2f}",
        "mapq20": score.mapq20,
        "precision_mapq20_pct": f"{percent(score.mapq20_correct, score.mapq20):.3f}",
        "once_each": "yes" if score.once_each else "NO",
        "missing": score.missing,
        "duplicated": score.duplicated,
        "unknown": score.unknown,
        "index_s": seconds(run.index_s),
        "map_s": seconds(run.map_s),
    } | (paired_fields(score) if score.paired else {})


def paired_fields(score: Score) -> dict:
    """PAIRED_COLUMNS of a pair score; each mate's correct share is of the pairs in."""
    pairs = score.reads_in // 2
    return {
        "properly_paired_pct": f"{percent(score.proper, score.primary):.2f}",
        "r1_primary": score.mate_primary[0],
        "r2_primary": score.mate_primary[1],
        "r1_correct_pct": f"{percent(score.mate_correct[0], pairs):.2f}",
        "r2_correct_pct": f"{percent(score.mate_correct[1], pairs):.2f}",
    }


def columns_of(rows: list[dict]) -> tuple:
    """COLUMNS, plus PAIRED_COLUMNS when the rows are of pairs."""
    return COLUMNS + (PAIRED_COLUMNS if rows and PAIRED_COLUMNS[0] in rows[0] else ())


def write_tsv(rows: list[dict], path: Path) -> None:
    columns = columns_of(rows)
    with open(path, "w") as out:
        out.write("\t".join(columns) + "\n")
        for row in rows:
            out.write("\t".join(str(row[c]) for c in columns) + "\n")


def markdown_table(rows: list[dict]) -> str:
    columns = columns_of(rows)
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(str(row[c]) for c in columns) + " |" for row in rows]
    return "\n".join(lines)


# --------------------------------------------------------------------------
# command line


def parse_args(argv=None):
    parser = argparse.ArgumentParser(
        description="Score aligners on reads simulated by bench/simulate.py."
    )
    parser.add_argument("--ref", required=True, type=Path, help="reference FASTA")
    parser.add_argument("--reads", required=True, type=Path, nargs="+", metavar="FASTQ",
                        help="simulated FASTQ(.gz), or two (R1 R2) for pairs")
    parser.add_argument("--bam", action="append", default=[], type=Path,
                        help="extra SAM/BAM to score (repeatable); labelled by file name")
    parser.add_argument("--peers", default=",".join(PEERS),
                        help="comma-separated peers to run: bwa,minimap2 ('' for none)")
    parser.add_argument("-t", "--threads", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--tolerance", type=int, default=5)
    parser.add_argument("--out", type=Path, help="write the results as TSV here")
    parser.add_argument("--workdir", type=Path,
                        help="keep indexes and alignments here (default: a temp dir)")
    parser.add_argument("--gpualign-cmd",
                        help="template to time our aligner, e.g. "
                             "'gpualign map {prefix} {reads} -o {bam} -t {threads}'")
    parser.add_argument("--gpualign-index-cmd",
                        help="template run before --gpualign-cmd, e.g. 'gpualign index {ref} {prefix}'")
    args = parser.parse_args(argv)
    args.peers = [p.strip() for p in args.peers.split(",") if p.strip()]
    if len(args.reads) > 2:
        parser.error("--reads takes one FASTQ, or two for pairs")
    unknown = set(args.peers) - set(PEERS)
    if unknown:
        parser.error(f"unknown peer(s): {', '.join(sorted(unknown))}")
    if args.gpualign_index_cmd and not args.gpualign_cmd:
        parser.error("--gpualign-index-cmd needs --gpualign-cmd")
    return args


def run_all(args, workdir: Path) -> list[Run]:
    runs = [Run(path.name, path) for path in args.bam]
    for peer in args.peers:
        print(f"running {peer} ...", file=sys.stderr)
        runs.append(run_peer(peer, args.ref, args.reads, workdir, args.threads))
    if args.gpualign_cmd:
        print("running gpualign ...", file=sys.stderr)
        runs.append(run_gpualign(args, workdir))
    return runs


def evaluate(args, workdir: Path) -> list[dict]:
    read_names = read_names_of(*args.reads)
    rows = []
    for run in run_all(args, workdir):
        score = score_alignment_file(run.alignments, read_names, args.tolerance)
        rows.append(report_row(run, score))
    return rows


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.workdir:
        args.workdir.mkdir(parents=True, exist_ok=True)
        rows = evaluate(args, args.workdir)
    else:
        with tempfile.TemporaryDirectory(prefix="accuracy_") as tmp:
            rows = evaluate(args, Path(tmp))
    if args.out:
        write_tsv(rows, args.out)
    for row in rows:
        if row["once_each"] != "yes":
            print(f"WARNING: {row['aligner']}: reads not present exactly once as primary "
                  f"(missing {row['missing']}, duplicated {row['duplicated']}, "
                  f"unknown {row['unknown']})", file=sys.stderr)
    print(markdown_table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
