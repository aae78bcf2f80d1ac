#!/usr/bin/env python3
"""Where aligners miss, by the repeat context of each read's true locus.

    python bench/repeats.py --genome GENOME.fa --index PREFIX.idx.npz --bwa-index BWA_PREFIX \\
        --bam gpualign=G.bam --bam bwa=B.bam [--bam minimap2=M.bam ...] \\
        [--tolerance 5] [--near-edits 5] [--dust 20] [-t 2] [--tsv reads.tsv] [--against bwa]
    python bench/repeats.py --report reads.tsv [--against bwa]      # the tables again, from a --tsv

Reads are simulated reads named with their truth (real_reads.py, simulate.py); every primary
record (each mate of a pair) is one read. The genome is the plain FASTA the reads came from (with or
without .fai; bench/real.py keeps it as WORKDIR/NAME/genome.fa, beside its indexes). Each read's true
window (the reference bases from its true leftmost position, as long as the read) is described by:

* **low complexity**: the highest DUST score (as sdust computes it: over a 64-base window, the sum of
  c(c-1)/2 over the counts c of its 3-mers, divided by the 3-mers less one) of the window's 64-base
  stretches; at least ``--dust`` (20, sdust's default threshold) counts as low complexity
  (homopolymers, short tandem repeats);
* **high-copy k-mers**: the gpualign index's bin sizes of the window's disjoint seed k-mers
  (seed.seed_offset's offsets, forward strand): how many seeds lie in bins over the index's max_occ
  (skipped by the first seeding pass) and the median bin size; half the seeds or more over max_occ
  counts as high-copy;
* **duplicated segment**: the window itself (no sequencing errors) aligned with ``bwa mem`` (an
  aligner independent of gpualign): its XS, the best score elsewhere, against the window's own score
  (its length): another copy scoring as well is an identical copy; within ``--near-edits`` mismatches'
  worth of score (5 a mismatch) a near copy.

Each read gets one context, the first that applies: identical copy, near copy, low complexity,
high-copy k-mers, unique. Each aligner's record of it is one of: correct with MAPQ >= 20, correct
with MAPQ < 20 (a recall loss), wrong with MAPQ >= 20 (a precision loss), wrong with MAPQ < 20,
unmapped; correct as accuracy.py scores it (true contig, leftmost position within --tolerance). The
table gives, per context, the reads and each aligner's losses, and (``--against``) the reads one
aligner loses where the other does not: the losses to work on next. A last table splits each aligner's
correct share into reads outside identical copies and reads in them: a read whose window has an
identical copy elsewhere matches each copy equally, so every aligner can only guess among them (right
1/copies of the time; in pairs the mate may tell them apart); two aligners' counts there differ by
chance, by about sqrt(2 n p (1 - p)) reads.
``--tsv`` writes every read's features and outcomes; ``--report`` prints the tables from such a file.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

import numpy as np
import pysam
from numba import njit

HERE = str(Path(__file__).resolve().parent)
if HERE not in sys.path:
    sys.path.insert(0, HERE)

import accuracy  # noqa: E402

CONTEXTS = ("identical copy", "near copy", "low complexity", "high-copy k-mers", "unique")
OUTCOMES = ("correct MAPQ>=20", "correct MAPQ<20", "wrong MAPQ>=20", "wrong MAPQ<20", "unmapped")
CODE = np.full(256, 4, dtype=np.uint8)
for i, b in enumerate(b"ACGT"):
    CODE[b] = CODE[b + 32] = i


@njit(cache=True)
def dust_max(codes, width):
    """The highest DUST score of codes' width-base stretches (every stretch, or the whole when shorter):
    sum of c(c-1)/2 over 3-mer counts c, over (3-mers - 1); 3-mers holding N are left out."""
    n = codes.shape[0]
    w = min(width, n)
    best = 0.0
    counts = np.zeros(64, dtype=np.int64)
    for start in range(0, n - w + 1):
        counts[:] = 0
        for i in range(start, start + w - 2):
            a, b, c = codes[i], codes[i + 1], codes[i + 2]
            if a < 4 and b < 4 and c < 4:
                counts[a * 16 + b * 4 + c] += 1
        s = 0
        for x in range(64):
            s += counts[x] * (counts[x] - 1) // 2
        score = s / max(w - 3, 1)
        if score > best:
            best = score
    return best


def seed_bins(codes, k, offsets):
    """Bin sizes of the disjoint seeds of a window (0, k, 2k, ..., the last ending at the end; as
    gpualign.seed.seed_offset), -1 for a seed holding N."""
    n = len(codes)
    out = []
    for s in range((n + k - 1) // k):
        o = min(s * k, n - k)
        km = 0
        for c in codes[o:o + k]:
            if c > 3:
                km = -1
                break
            km = km * 4 + int(c)
        out.append(-1 if km < 0 else int(offsets[km + 1] - offsets[km]))
    return out


def outcome(record, tolerance: int) -> str:
    if record is None or record.is_unmapped:
        return "unmapped"
    ok = accuracy.is_correct(record, tolerance)
    return f"{'correct' if ok else 'wrong'} MAPQ{'>=' if record.mapping_quality >= 20 else '<'}20"


def load_outcomes(path: Path, tolerance: int) -> tuple[dict, dict]:
    """Each read's outcome (accuracy.read_key: name, or (name, mate)), and its true window (contig,
    0-based start, length)."""
    got, truth = {}, {}
    with pysam.AlignmentFile(str(path), check_sq=False) as bam:
        for rec in bam:
            if rec.is_secondary or rec.is_supplementary:
                continue
            key = accuracy.read_key(rec)
            got[key] = outcome(rec, tolerance)
            contig, pos = accuracy.parse_truth(rec.query_name, accuracy.mate_of(rec))
            truth[key] = (contig, pos - 1, rec.query_length or rec.infer_read_length() or 0)
    return got, truth


def window_copies(windows: list[str], bwa_index: str, threads: int) -> list[tuple[int, int]]:
    """(AS, XS) of each window aligned on its own by bwa mem (XS -1 where bwa saw no other hit)."""
    with tempfile.TemporaryDirectory() as tmp:
        fa = Path(tmp) / "windows.fa"
        with open(fa, "w") as fh:
            for i, w in enumerate(windows):
                fh.write(f">{i}\n{w}\n")
        out = [(-1, -1)] * len(windows)
        proc = subprocess.Popen(["bwa", "mem", "-t", str(threads), bwa_index, str(fa)], stdout=subprocess.PIPE,
                                stderr=subprocess.DEVNULL)
        with pysam.AlignmentFile(proc.stdout, "r") as sam:
            for rec in sam:
                if rec.is_secondary or rec.is_supplementary or rec.is_unmapped:
                    continue
                xs = rec.get_tag("XS") if rec.has_tag("XS") else -1
                out[int(rec.query_name)] = (rec.get_tag("AS"), xs)
        if proc.wait():
            raise RuntimeError(f"bwa mem exited with {proc.returncode}")
    return out


def context_of(length, as_xs, dust, bins, max_occ, near_edits, dust_threshold) -> str:
    _, xs = as_xs
    if xs >= length:
        return "identical copy"
    if xs >= length - 5 * near_edits:
        return "near copy"
    if dust >= dust_threshold:
        return "low complexity"
    usable = [b for b in bins if b >= 0]
    if usable and 2 * sum(b > max_occ for b in usable) >= len(usable):
        return "high-copy k-mers"
    return "unique"


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    if argv is None:
        argv = sys.argv[1:]
    from_tsv = "--report" in argv
    p.add_argument("--report", type=Path, help="print the tables from a --tsv file, nothing else")
    p.add_argument("--genome", required=not from_tsv, type=Path, help="the plain FASTA the reads were simulated from")
    p.add_argument("--index", required=not from_tsv, help="gpualign's k-mer index (PREFIX.idx.npz)")
    p.add_argument("--bwa-index", required=not from_tsv, help="bwa index prefix of the same genome")
    p.add_argument("--bam", action="append", required=not from_tsv, default=[], metavar="NAME=PATH",
                   help="an aligner's BAM/SAM")
    p.add_argument("--tolerance", type=int, default=5)
    p.add_argument("--near-edits", type=int, default=5, help="a near copy: within this many mismatches [5]")
    p.add_argument("--dust", type=float, default=20.0, help="DUST score of low complexity [20]")
    p.add_argument("--against", default="bwa", help="the aligner whose losses the others are compared with [bwa]")
    p.add_argument("-t", "--threads", type=int, default=2)
    p.add_argument("--tsv", type=Path, help="every read's features and outcomes")
    args = p.parse_args(argv)
    args.bams = dict(b.split("=", 1) for b in args.bam)
    return args


FEATURES = ("read", "context", "xs", "dust", "seeds_capped", "seeds", "median_bin")


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.report:
        with open(args.report) as fh:
            cols = fh.readline().rstrip("\n").split("\t")
            rows = [dict(zip(cols, line.rstrip("\n").split("\t"))) for line in fh]
        print(report(rows, [c for c in cols if c not in FEATURES], args.against))
        return 0
    outcomes, truth = {}, None
    for name, path in args.bams.items():
        outcomes[name], t = load_outcomes(Path(path), args.tolerance)
        truth = truth or t
    keys = list(truth)
    print(f"{len(keys)} reads; aligners {', '.join(outcomes)}", file=sys.stderr)
    with np.load(args.index) as z:
        k, max_occ, offsets = int(z["k"]), int(z["max_occ"]), z["offsets"]
    fasta = pysam.FastaFile(str(args.genome))
    windows = [fasta.fetch(c, s, s + n).upper() for c, s, n in (truth[key] for key in keys)]
    copies = window_copies(windows, args.bwa_index, args.threads)
    rows = []
    for key, w, as_xs in zip(keys, windows, copies):
        codes = CODE[np.frombuffer(w.encode(), dtype=np.uint8)]
        dust = dust_max(codes, 64)
        bins = seed_bins(codes, k, offsets)
        ctx = context_of(len(w), as_xs, dust, bins, max_occ, args.near_edits, args.dust)
        usable = [b for b in bins if b >= 0]
        rows.append(dict(read=key if isinstance(key, str) else f"{key[0]}/{key[1]}", context=ctx,
                         xs=as_xs[1], dust=round(dust, 1), seeds_capped=sum(b > max_occ for b in usable),
                         seeds=len(usable), median_bin=int(np.median(usable)) if usable else -1,
                         **{a: outcomes[a].get(key, "unmapped") for a in outcomes}))
    if args.tsv:
        cols = list(rows[0])
        with open(args.tsv, "w") as fh:
            fh.write("\t".join(cols) + "\n")
            for r in rows:
                fh.write("\t".join(str(r[c]) for c in cols) + "\n")
    print(report(rows, list(outcomes), args.against))
    return 0


def report(rows, aligners, against) -> str:
    """Markdown tables: per context, the reads and each aligner's losses; then the losses of each
    aligner where `against` has none, per context."""
    by = Counter(r["context"] for r in rows)
    total = len(rows)
    lines = [f"Reads by the repeat context of their true locus ({total:,} reads); per aligner: "
             "wrong at MAPQ >= 20 / correct at MAPQ < 20 / wrong at MAPQ < 20 / unmapped", ""]
    head = ["context", "reads", "%"] + aligners
    lines += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for ctx in CONTEXTS + ("all",):
        sel = [r for r in rows if ctx == "all" or r["context"] == ctx]
        cells = [ctx, f"{len(sel):,}", f"{100 * len(sel) / max(total, 1):.2f}"]
        for a in aligners:
            c = Counter(r[a] for r in sel)
            cells.append(" / ".join(str(c[o]) for o in OUTCOMES[2:3] + OUTCOMES[1:2] + OUTCOMES[3:]))
        lines.append("| " + " | ".join(cells) + " |")
    if against in aligners:
        others = [a for a in aligners if a != against]
        lines += ["", f"Reads {against} places correctly at MAPQ >= 20 that another aligner does not "
                      f"(correct at MAPQ < 20 / wrong / unmapped), and the reverse", ""]
        head = ["context"] + [f"{a} loses" for a in others] + [f"{against} loses vs {a}" for a in others]
        lines += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        good = OUTCOMES[0]
        for ctx in CONTEXTS + ("all",):
            sel = [r for r in rows if ctx == "all" or r["context"] == ctx]
            cells = [ctx]
            for a in others:
                c = Counter(r[a] for r in sel if r[against] == good and r[a] != good)
                cells.append(f"{c[OUTCOMES[1]]} / {c[OUTCOMES[2]] + c[OUTCOMES[3]]} / {c['unmapped']}")
            for a in others:
                c = Counter(r[against] for r in sel if r[a] == good and r[against] != good)
                cells.append(f"{c[OUTCOMES[1]]} / {c[OUTCOMES[2]] + c[OUTCOMES[3]]} / {c['unmapped']}")
            lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines + [""] + correct_shares(rows, aligners))


def correct_shares(rows, aligners) -> list:
    """Markdown lines: each aligner's correct share of all reads, of the reads outside identical
    copies, and its correct reads of those in identical copies (a guess among equal copies), with the
    chance spread of two guessers' counts there."""
    ident = [r for r in rows if r["context"] == CONTEXTS[0]]
    rest = [r for r in rows if r["context"] != CONTEXTS[0]]

    def right(sel, a):
        return sum(r[a].startswith("correct") for r in sel)
    lines = ["Correct (within the tolerance) by whether the true window has an identical copy elsewhere", "",
             "| aligner | all reads % | outside identical copies % (wrong) | in identical copies: correct of "
             f"{len(ident):,} |", "|---|---|---|---|"]
    for a in aligners:
        wrong = len(rest) - right(rest, a)
        lines.append(f"| {a} | {100 * right(rows, a) / max(len(rows), 1):.3f} | "
                     f"{100 * right(rest, a) / max(len(rest), 1):.4f} ({wrong}) | {right(ident, a):,} |")
    if ident:
        p = sum(right(ident, a) for a in aligners) / (len(ident) * len(aligners))
        lines += ["", f"Two aligners guessing among identical copies differ by chance by about "
                      f"{(2 * len(ident) * p * (1 - p)) ** 0.5:.0f} reads there (one standard deviation)."]
    return lines


if __name__ == "__main__":
    sys.exit(main())
