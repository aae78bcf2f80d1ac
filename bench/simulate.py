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

Paired mode (two output paths): step 3 draws a fragment instead, of length
``max(length, round(Normal(--insert-mean, --insert-sd)))`` on a random strand;
R1 is read from the fragment's 5' end on the fragment strand and R2 is the
reverse complement of its other end (Illumina FR), each copied as in step 4.
Fragments touching N or a contig end are redrawn.  Both mates carry the same
name, ``p{num}:{contig}:{pos1}:{strand1}:{pos2}:{strand2}`` (mate 1's then
mate 2's leftmost forward position and strand; parse with
``parse_pair_name``); the ``p`` tells it from a single-end name.

The output is gzip FASTQ whose bytes depend only on the inputs and options.
"""
from __future__ import annotations

import argparse
import gzip
import sys
from contextlib import contextmanager
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


def format_pair_name(num: int, contig: str, mate1: tuple[int, str], mate2: tuple[int, str]) -> str:
    """Name of both mates of pair ``num``; each mate is (1-based leftmost pos, strand)."""
    return f"p{num}:{contig}:{mate1[0]}:{mate1[1]}:{mate2[0]}:{mate2[1]}"


def parse_pair_name(name: str) -> tuple[int, str, tuple[int, str], tuple[int, str]]:
    """Inverse of ``format_pair_name``: (number, contig, (pos1, strand1), (pos2, strand2))."""
    head, pos1, strand1, pos2, strand2 = name.rsplit(":", 4)
    number, contig = head.split(":", 1)
    if number[:1] != "p" or not number[1:].isdigit() or {strand1, strand2} - {"+", "-"}:
        raise ValueError(f"not a simulated pair name: {name!r}")
    return int(number[1:]), contig, (int(pos1), strand1), (int(pos2), strand2)


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

    def sequenced(self, read: np.ndarray) -> tuple[bytes, bytes]:
        """Sequence and quality strings of a read (in read orientation) after errors."""
        read, quals = add_errors(read, self.sub_rate, self.n_rate, self.rng)
        return LETTERS[read].tobytes(), (quals + 33).astype(np.uint8).tobytes()

    def read(self, num: int) -> tuple[str, bytes, bytes]:
        """Return (name, sequence, quality string) of read number ``num``."""
        contig, start, read = self.draw_fragment()
        strand = "-" if self.rng.random() < 0.5 else "+"
        if strand == "-":
            read = COMPLEMENT[read[::-1]]
        return (format_name(num, contig.name, start + 1, strand), *self.sequenced(read))


class PairSimulator(ReadSimulator):
    """Draws FR read pairs from fragments; see the module docstring."""

    def __init__(self, contigs, length, sub_rate, indel_rate, n_rate, rng, insert_mean, insert_sd):
        super().__init__(contigs, length, sub_rate, indel_rate, n_rate, rng)
        self.insert_mean, self.insert_sd = insert_mean, insert_sd

    def end_read(self, seq: np.ndarray, start: int, end: int, forward: bool):
        """Copy a read from one end of the fragment [start, end) inwards.

        Returns (codes in read orientation, 0-based leftmost position, span); the
        read is short when it runs off the contig."""
        if forward:
            read, span = copy_with_indels(seq, start, self.length, self.indel_rate, self.rng)
            return read, start, span
        # reverse-complement only a window: deletions may need a little more than length bases
        window = COMPLEMENT[seq[max(0, end - 2 * self.length):end][::-1]]
        read, span = copy_with_indels(window, 0, self.length, self.indel_rate, self.rng)
        return read, end - span, span

    def draw_pair(self):
        """Return (contig, mate 1, mate 2), mates as (codes, 0-based leftmost, strand)."""
        rng, length = self.rng, self.length
        for _ in range(MAX_TRIES):
            contig = self.contigs[rng.choice(len(self.contigs), p=self.weights)]
            size = max(length, int(round(rng.normal(self.insert_mean, self.insert_sd))))
            if size > len(contig.seq):
                continue
            start = int(rng.integers(0, len(contig.seq) - size + 1))
            plus = rng.random() < 0.5
            left = self.end_read(contig.seq, start, start + size, True)
            right = self.end_read(contig.seq, start, start + size, False)
            # the fragment and both mates' spans (indels can take a mate past the fragment)
            lo, hi = min(start, right[1]), max(start + size, left[1] + left[2])
            if len(left[0]) == len(right[0]) == length and lo >= 0 and hi <= len(contig.seq) \
                    and not np.any(contig.seq[lo:hi] == N_CODE):
                left, right = (left[0], left[1], "+"), (right[0], right[1], "-")
                return (contig, left, right) if plus else (contig, right, left)
        raise RuntimeError(f"no N-free fragment found in {MAX_TRIES} tries")

    def pair(self, num: int) -> list[tuple[str, bytes, bytes]]:
        """Return [(name, sequence, quality string)] of mates 1 and 2 of pair ``num``."""
        contig, mate1, mate2 = self.draw_pair()
        name = format_pair_name(num, contig.name, (mate1[1] + 1, mate1[2]), (mate2[1] + 1, mate2[2]))
        return [(name, *self.sequenced(codes)) for codes, _, _ in (mate1, mate2)]


@contextmanager
def gzip_output(path):
    """A gzip file whose bytes depend only on what is written (no name, mtime 0)."""
    with open(path, "wb") as raw, gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0) as out:
        yield out


def fastq_record(name: str, seq: bytes, qual: bytes) -> bytes:
    return b"@%s\n%s\n+\n%s\n" % (name.encode(), seq, qual)


def simulate(args) -> int:
    """Write the reads (or pairs, given two outputs); return their count."""
    rng = np.random.default_rng(args.seed)
    genome = apply_snps(read_fasta(Path(args.reference)), args.snp, rng)
    if args.part is not None:   # one of several processes: same sample genome, own read stream
        rng = np.random.default_rng([args.seed, args.part])
    rates = (args.sub, args.indel, args.fraction_n, rng)
    if len(args.output) == 1:
        sim = ReadSimulator(genome, args.length, *rates)
        with gzip_output(args.output[0]) as out:
            for num in range(args.first, args.first + args.num_reads):
                out.write(fastq_record(*sim.read(num)))
        return args.num_reads
    sim = PairSimulator(genome, args.length, *rates, args.insert_mean, args.insert_sd)
    with gzip_output(args.output[0]) as out1, gzip_output(args.output[1]) as out2:
        for num in range(args.first, args.first + args.num_reads):
            mate1, mate2 = sim.pair(num)
            out1.write(fastq_record(*mate1))
            out2.write(fastq_record(*mate2))
    return args.num_reads


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("reference", help="reference FASTA (.fa or .fa.gz)")
    parser.add_argument("-n", "--num-reads", type=int, required=True, help="reads, or pairs when paired")
    parser.add_argument("-l", "--length", type=int, default=100)
    parser.add_argument("--sub", type=float, default=0.01, help="sequencing substitution rate")
    parser.add_argument("--indel", type=float, default=0.001, help="indel rate per read base")
    parser.add_argument("--snp", type=float, default=0.001, help="SNP rate of the sample genome")
    parser.add_argument("--fraction-n", type=float, default=0.0, help="rate of N read bases")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--part", type=int, help="simulate in parts on several processes: this part's number "
                        "(the SNPs stay those of --seed, the reads come from a stream of their own)")
    parser.add_argument("--first", type=int, default=1, help="number of the first read or pair [1]")
    parser.add_argument("-o", "--output", required=True, nargs="+", metavar="FQ_GZ",
                        help="output FASTQ (gzip); two paths (R1 R2) simulate pairs")
    parser.add_argument("--insert-mean", type=float, default=400.0,
                        help="mean fragment length of pairs [400]")
    parser.add_argument("--insert-sd", type=float, default=40.0,
                        help="standard deviation of the fragment length [40]")
    args = parser.parse_args(argv)
    if args.num_reads < 0 or args.length < 2 * EDGE + 1:
        parser.error(f"need -n >= 0 and -l >= {2 * EDGE + 1}")
    if len(args.output) > 2 or len(set(args.output)) != len(args.output):
        parser.error("-o takes one path, or two different paths for pairs")
    if args.insert_sd < 0:
        parser.error("--insert-sd must be >= 0")
    for rate in ("sub", "indel", "snp", "fraction_n"):
        if not 0.0 <= getattr(args, rate) <= 1.0:
            parser.error(f"--{rate.replace('_', '-')} must be within [0, 1]")
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    count = simulate(args)
    what = "reads" if len(args.output) == 1 else "pairs"
    print(f"wrote {count} {what} to {' and '.join(args.output)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
