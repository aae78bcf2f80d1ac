#!/usr/bin/env python3
"""Deterministic short-read simulator (numpy only) for accuracy benchmarks.

Steps, all driven by one ``numpy.random.Generator`` seeded with ``--seed``:

1. Read the reference FASTA (plain or gzip).  Bases other than A/C/G/T
   (case-insensitive) become N.
2. Apply SNPs at rate ``--snp`` to make one "sample genome" shared by all reads.
3. For each read pick a contig (weighted by length), a strand and a uniform
   start; windows touching N or running off the contig end are redrawn.
4. Copy the read from the sample genome, introducing small indels (length 1-3,
   rate ``--indel`` per read base, never within ``EDGE`` bases of either end so
   the leftmost aligned position stays well defined), then sequencing
   substitutions at rate ``--sub`` and N bases at rate ``--fraction-n``.
5. Reverse-complement reads drawn on the minus strand.

Each read is named ``r{num}:{contig}:{pos}:{strand}`` where ``num`` counts from
1, ``pos`` is the 1-based leftmost position of the read's reference span on the
forward strand and ``strand`` is ``+`` or ``-``.  Contig names may contain ':',
so parse the name with ``parse_read_name`` (split once from the left for the
number and twice from the right for position and strand).

The output is a gzip FASTQ whose bytes depend only on the inputs and options.
"""
from __future__ import annotations

import argparse
import gzip
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

# Base codes: 0..3 = A, C, G, T; 4 = N.
N_CODE = 4
LETTERS = np.frombuffer(b"ACGTN", dtype=np.uint8)
COMPLEMENT = np.array([3, 2, 1, 0, 4], dtype=np.uint8)
EDGE = 5          # no indel starts within this many bases of a read end
MAX_INDEL = 3
MAX_TRIES = 10_000


def _encoding_table() -> np.ndarray:
    table = np.full(256, N_CODE, dtype=np.uint8)
    for code, base in enumerate(b"ACGT"):
        table[base] = code
        table[base + 32] = code  # lower case
    return table


ENCODE = _encoding_table()


@dataclass
class Contig:
    name: str
    seq: np.ndarray  # uint8 base codes


def _open_text(path: Path):
    if path.suffix == ".gz":
        return gzip.open(path, "rb")
    return open(path, "rb")


def read_fasta(path: Path) -> list[Contig]:
    """Return the contigs of a FASTA file, names cut at the first whitespace."""
    contigs: list[Contig] = []
    name, chunks = None, []

    def flush():
        if name is not None:
            raw = np.frombuffer(b"".join(chunks), dtype=np.uint8)
            contigs.append(Contig(name, ENCODE[raw]))

    with _open_text(path) as handle:
        for line in handle:
            if line.startswith(b">"):
                flush()
                header = line[1:].decode().split()
                name, chunks = (header[0] if header else ""), []
            else:
                chunks.append(line.strip())
    flush()
    if not contigs:
        raise ValueError(f"{path}: no FASTA records")
    return contigs


def apply_snps(contigs: list[Contig], rate: float, rng: np.random.Generator) -> list[Contig]:
    """Return copies of the contigs with a random different base at rate ``rate``."""
    mutated = []
    for contig in contigs:
        seq = contig.seq.copy()
        count = rng.binomial(len(seq), rate) if rate > 0 else 0
        positions = np.unique(rng.integers(0, len(seq), size=count))
        positions = positions[seq[positions] != N_CODE]
        shift = rng.integers(1, 4, size=len(positions), dtype=np.uint8)
        seq[positions] = (seq[positions] + shift) % 4
        mutated.append(Contig(contig.name, seq))
    return mutated


def copy_with_indels(
    ref: np.ndarray, start: int, length: int, indel_rate: float, rng: np.random.Generator
) -> tuple[np.ndarray, int]:
    """Copy ``length`` read bases from ``ref`` at ``start`` with small indels.

    Returns the read codes and the number of reference bases it spans.  The
    read may be shorter than ``length`` only when it runs off the reference.
    """
    interior = np.arange(EDGE, max(EDGE, length - EDGE))
    events = interior[rng.random(len(interior)) < indel_rate]
    pieces, produced, cursor = [], 0, start
    for event_at in events:
        if event_at < produced:  # swallowed by an earlier insertion
            continue
        take = event_at - produced
        pieces.append(ref[cursor:cursor + take])
        cursor, produced = cursor + take, produced + take
        size = int(rng.integers(1, MAX_INDEL + 1))
        if rng.random() < 0.5:
            size = min(size, length - EDGE - produced)
            pieces.append(rng.integers(0, 4, size=size, dtype=np.uint8))
            produced += size
        else:
            cursor += size
    pieces.append(ref[cursor:cursor + length - produced])
    cursor += length - produced
    return np.concatenate(pieces).astype(np.uint8, copy=False), cursor - start


def add_errors(read: np.ndarray, sub_rate: float, n_rate: float, rng: np.random.Generator):
    """Apply sequencing substitutions and N bases; return (read, Phred scores)."""
    read = read.copy()
    quals = rng.integers(25, 41, size=len(read))
    subs = rng.random(len(read)) < sub_rate
    read[subs] = (read[subs] + rng.integers(1, 4, size=int(subs.sum()), dtype=np.uint8)) % 4
    quals[subs] = rng.integers(5, 25, size=int(subs.sum()))
    ns = rng.random(len(read)) < n_rate
    read[ns] = N_CODE
    quals[ns] = 2
    return read, quals


def format_name(num: int, contig: str, pos: int, strand: str) -> str:
    return f"r{num}:{contig}:{pos}:{strand}"


def parse_read_name(name: str) -> tuple[int, str, int, str]:
    """Inverse of ``format_name``: (number, contig, 1-based pos, strand)."""
    head, pos, strand = name.rsplit(":", 2)
    number, contig = head.split(":", 1)
    if not number.startswith("r") or strand not in "+-" or len(strand) != 1:
        raise ValueError(f"not a simulated read name: {name!r}")
    return int(number[1:]), contig, int(pos), strand


class ReadSimulator:
    """Draws reads from a (mutated) genome; see the module docstring."""

    def __init__(self, contigs, length, sub_rate, indel_rate, n_rate, rng):
        self.contigs = [c for c in contigs if len(c.seq) >= length + MAX_INDEL * 4]
        if not self.contigs:
            raise ValueError(f"no contig is long enough for {length} bp reads")
        weights = np.array([len(c.seq) - length + 1 for c in self.contigs], dtype=float)
        self.weights = weights / weights.sum()
        self.length, self.sub_rate, self.indel_rate, self.n_rate = length, sub_rate, indel_rate, n_rate
        self.rng = rng

    def draw_fragment(self):
        """Return (contig, 0-based start, read codes) for one N-free window."""
        rng = self.rng
        for _ in range(MAX_TRIES):
            contig = self.contigs[rng.choice(len(self.contigs), p=self.weights)]
            start = int(rng.integers(0, len(contig.seq) - self.length + 1))
            read, span = copy_with_indels(contig.seq, start, self.length, self.indel_rate, rng)
            if len(read) == self.length and start + span <= len(contig.seq) \
                    and not np.any(contig.seq[start:start + span] == N_CODE):
                return contig, start, read
        raise RuntimeError(f"no N-free window found in {MAX_TRIES} tries")

    def read(self, num: int) -> tuple[str, bytes, bytes]:
        """Return (name, sequence, quality string) of read number ``num``."""
        contig, start, read = self.draw_fragment()
        strand = "-" if self.rng.random() < 0.5 else "+"
        if strand == "-":
            read = COMPLEMENT[read[::-1]]
        read, quals = add_errors(read, self.sub_rate, self.n_rate, self.rng)
        qual = (quals + 33).astype(np.uint8).tobytes()
        return format_name(num, contig.name, start + 1, strand), LETTERS[read].tobytes(), qual


def simulate(args) -> int:
    rng = np.random.default_rng(args.seed)
    genome = apply_snps(read_fasta(Path(args.reference)), args.snp, rng)
    sim = ReadSimulator(genome, args.length, args.sub, args.indel, args.fraction_n, rng)
    with open(args.output, "wb") as raw, \
            gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0) as out:
        for num in range(1, args.num_reads + 1):
            name, seq, qual = sim.read(num)
            out.write(b"@%s\n%s\n+\n%s\n" % (name.encode(), seq, qual))
    return args.num_reads


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("reference", help="reference FASTA (.fa or .fa.gz)")
    parser.add_argument("-n", "--num-reads", type=int, required=True)
    parser.add_argument("-l", "--length", type=int, default=100)
    parser.add_argument("--sub", type=float, default=0.01, help="sequencing substitution rate")
    parser.add_argument("--indel", type=float, default=0.001, help="indel rate per read base")
    parser.add_argument("--snp", type=float, default=0.001, help="SNP rate of the sample genome")
    parser.add_argument("--fraction-n", type=float, default=0.0, help="rate of N read bases")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("-o", "--output", required=True, help="output FASTQ (gzip)")
    args = parser.parse_args(argv)
    if args.num_reads < 0 or args.length < 2 * EDGE + 1:
        parser.error(f"need -n >= 0 and -l >= {2 * EDGE + 1}")
    for rate in ("sub", "indel", "snp", "fraction_n"):
        if not 0.0 <= getattr(args, rate) <= 1.0:
            parser.error(f"--{rate.replace('_', '-')} must be within [0, 1]")
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    count = simulate(args)
    print(f"wrote {count} reads to {args.output}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
