#!/usr/bin/env python3
"""Score aligners against the truth carried in simulated read names.

Reads come from ``bench/simulate.py`` and are named
``r{num}:{contig}:{pos}:{strand}`` (``pos`` is 1-based and leftmost on the
forward strand).  This script runs the peer aligners (``bwa mem``,
``minimap2 -ax sr``) and optionally our own aligner on the same reads, then
scores every SAM/BAM with pysam:

* only primary records count (flags 0x100 and 0x800 are skipped);
* a read is *correct* when it is mapped to its true contig and its leftmost
  aligned position, moved left by any leading soft/hard clip, lies within
  ``--tolerance`` bases of the truth;
* every read must appear exactly once as a primary record: reads missing,
  repeated or unknown are counted and reported.

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
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

import pysam

PEERS = ("bwa", "minimap2")
MAPQ_CUTOFF = 20
CLIP_OPS = (pysam.CSOFT_CLIP, pysam.CHARD_CLIP)


# --------------------------------------------------------------------------
# truth and scoring


def parse_truth(name: str) -> tuple[str, int]:
    """Return (contig, 1-based leftmost position) from a simulated read name."""
    head, pos, strand = name.rsplit(":", 2)
    _number, contig = head.split(":", 1)
    if strand not in ("+", "-"):
        raise ValueError(f"not a simulated read name: {name!r}")
    return contig, int(pos)


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
    contig, pos = parse_truth(record.query_name)
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

    @property
    def once_each(self) -> bool:
        return self.missing == 0 and self.duplicated == 0 and self.unknown == 0


def score_records(
    records: Iterable[pysam.AlignedSegment], read_names: set[str], tolerance: int
) -> Score:
    """Score primary records against the truth in their names."""
    score = Score(reads_in=len(read_names))
    seen: Counter[str] = Counter()
    for record in records:
        if record.is_secondary or record.is_supplementary:
            continue
        seen[record.query_name] += 1
        score.primary += 1
        if record.is_unmapped:
            continue
        correct = is_correct(record, tolerance)
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


def read_names_of(reads: Path) -> set[str]:
    with pysam.FastxFile(str(reads)) as handle:
        return {entry.name for entry in handle}


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


def run_bwa(ref: Path, reads: Path, workdir: Path, threads: int) -> Run:
    prefix, sam = workdir / "bwa" / "ref", workdir / "bwa.sam"
    prefix.parent.mkdir(parents=True, exist_ok=True)
    q = shlex.quote
    index_s = timed(f"bwa index -p {q(str(prefix))} {q(str(ref))}")
    map_s = timed(f"bwa mem -t {threads} {q(str(prefix))} {q(str(reads))}", stdout=sam)
    return Run("bwa", sam, index_s, map_s)


def run_minimap2(ref: Path, reads: Path, workdir: Path, threads: int) -> Run:
    index, sam = workdir / "minimap2.mmi", workdir / "minimap2.sam"
    q = shlex.quote
    index_s = timed(f"minimap2 -x sr -t {threads} -d {q(str(index))} {q(str(ref))}")
    map_s = timed(f"minimap2 -ax sr -t {threads} {q(str(index))} {q(str(reads))}", stdout=sam)
    return Run("minimap2", sam, index_s, map_s)


PEER_RUNNERS = {"bwa": run_bwa, "minimap2": run_minimap2}


def run_gpualign(args, workdir: Path) -> Run:
    """Run the ``--gpualign-index-cmd`` / ``--gpualign-cmd`` templates.

    Placeholders: {ref} {prefix} {reads} {bam} {threads} {workdir}; values
    are shell-quoted before substitution.
    """
    bam = workdir / "gpualign.bam"
    values = {
        "ref": args.ref, "prefix": workdir / "gpualign_index" / "ref", "reads": args.reads,
        "bam": bam, "threads": args.threads, "workdir": workdir,
    }
    Path(values["prefix"]).parent.mkdir(parents=True, exist_ok=True)
    quoted = {key: shlex.quote(str(value)) for key, value in values.items()}
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
    }


def write_tsv(rows: list[dict], path: Path) -> None:
    with open(path, "w") as out:
        out.write("\t".join(COLUMNS) + "\n")
        for row in rows:
            out.write("\t".join(str(row[c]) for c in COLUMNS) + "\n")


def markdown_table(rows: list[dict]) -> str:
    lines = ["| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    lines += ["| " + " | ".join(str(row[c]) for c in COLUMNS) + " |" for row in rows]
    return "\n".join(lines)


# --------------------------------------------------------------------------
# command line


def parse_args(argv=None):
    parser = argparse.ArgumentParser(
        description="Score aligners on reads simulated by bench/simulate.py."
    )
    parser.add_argument("--ref", required=True, type=Path, help="reference FASTA")
    parser.add_argument("--reads", required=True, type=Path, help="simulated FASTQ(.gz)")
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
    unknown = set(args.peers) - set(PEER_RUNNERS)
    if unknown:
        parser.error(f"unknown peer(s): {', '.join(sorted(unknown))}")
    if args.gpualign_index_cmd and not args.gpualign_cmd:
        parser.error("--gpualign-index-cmd needs --gpualign-cmd")
    return args


def run_all(args, workdir: Path) -> list[Run]:
    runs = [Run(path.name, path) for path in args.bam]
    for peer in args.peers:
        print(f"running {peer} ...", file=sys.stderr)
        runs.append(PEER_RUNNERS[peer](args.ref, args.reads, workdir, args.threads))
    if args.gpualign_cmd:
        print("running gpualign ...", file=sys.stderr)
        runs.append(run_gpualign(args, workdir))
    return runs


def evaluate(args, workdir: Path) -> list[dict]:
    read_names = read_names_of(args.reads)
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
